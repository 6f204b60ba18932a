"""The service on Citus: two `agent-replay serve` replicas over one Citus coordinator.

The stream's exactly-once property across replicas (tests/stream/test_replicas.py's tests,
run here with `database_url` the coordinator's), the append route at 1 and 1,000 chunks a
request, a hosted run followed by a reader on each replica, and a thread's runs listed,
projected, transcribed and exported.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx

from agent_replay.log import EventLog
from tests.stream.test_replicas import (
    Replicas,
    http,
    replicas,
    test_replicas_when_50_clients_drop_and_resume_then_each_gets_the_stored_log,
    test_replicas_when_client_drops_and_resumes_then_exactly_the_stored_log,
)
from tests.stream.wire import SseReader

__all__ = [
    "http",
    "replicas",
    "test_replicas_when_50_clients_drop_and_resume_then_each_gets_the_stored_log",
    "test_replicas_when_client_drops_and_resumes_then_exactly_the_stored_log",
]

DEADLINE = 60.0


def _chunks(run: str, n: int) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{run}:{i}"} for i in range(n)
    ]


async def test_append_route_when_1_or_1000_chunks_on_citus_then_stored_in_order_once(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    for size in (1, 1000):
        runs = [f"route-{size}-{uuid.uuid4().hex[:10]}" for _ in range(8)]
        # Every run twice, from both replicas at once: groups of several runs on both
        # workers, and each run's second request after its first.
        for base in (replicas.a, replicas.b):
            answers = await asyncio.gather(
                *(
                    http.post(f"{base}/v1/runs/{run}/events", json={"events": _chunks(run, size)})
                    for run in runs
                )
            )
            assert all(a.status_code == 200 for a in answers), [a.text for a in answers]
        for run in runs:
            stored = await event_log.read_events(run, 0, 3 * size)
            assert [e.seq for e in stored] == list(range(1, 2 * size + 1))
            assert [json.loads(e.chunk)["delta"] for e in stored] == [
                f"{run}:{i}" for i in list(range(size)) * 2
            ]


async def _follow(http: httpx.AsyncClient, base: str, run: str) -> list[tuple[int, str]]:
    reader = SseReader()
    async with http.stream("GET", f"{base}/v1/runs/{run}/stream") as response:
        assert response.status_code == 200
        async for data in response.aiter_bytes():
            reader.feed(data)
    return reader.events


async def test_hosted_run_when_a_reader_on_each_replica_then_both_get_the_stored_run_once(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    run = f"hosted-{uuid.uuid4().hex[:10]}"
    started = await http.post(
        f"{replicas.a}/v1/agents/demo/runs", json={"runId": run, "threadId": f"th-{run}"}
    )
    assert started.status_code in (200, 201), started.text
    async with asyncio.timeout(DEADLINE):
        on_a, on_b = await asyncio.gather(
            _follow(http, replicas.a, run), _follow(http, replicas.b, run)
        )
    stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, 10_000)]
    assert json.loads(stored[-1][1])["type"] == "RUN_FINISHED"
    assert on_a == stored
    assert on_b == stored
    record = await event_log.get_run(run)
    assert record.closed and record.status == "finished"


async def test_audit_when_a_thread_of_hosted_runs_on_citus_then_listed_projected_exported(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    thread = f"th-audit-{uuid.uuid4().hex[:10]}"
    runs = [f"audit-{uuid.uuid4().hex[:10]}" for _ in range(3)]
    for run in runs:
        started = await http.post(
            f"{replicas.a}/v1/agents/demo/runs", json={"runId": run, "threadId": thread}
        )
        assert started.status_code in (200, 201), started.text
        async with asyncio.timeout(DEADLINE):
            await _follow(http, replicas.a, run)  # to its end
    # Runs on both workers, read through the other replica.
    listed = await http.get(f"{replicas.b}/v1/runs", params={"thread_id": thread})
    assert listed.status_code == 200, listed.text
    assert sorted(r["run_id"] for r in listed.json()["runs"]) == sorted(runs)
    finished = await http.get(
        f"{replicas.b}/v1/runs", params={"thread_id": thread, "status": "finished"}
    )
    assert len(finished.json()["runs"]) == 3
    messages = await http.get(f"{replicas.b}/v1/threads/{thread}/messages")
    assert messages.status_code == 200, messages.text
    transcript = await http.get(f"{replicas.b}/v1/threads/{thread}/transcript")
    assert transcript.status_code == 200, transcript.text
    exported = await http.get(f"{replicas.b}/v1/runs/{runs[0]}/export")
    assert exported.status_code == 200, exported.text
    stored = await event_log.read_events(runs[0], 0, 10_000)
    assert len(exported.text.strip().splitlines()) >= len(stored)
