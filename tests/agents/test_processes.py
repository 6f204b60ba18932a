"""Hosted runs across processes: a killed driver's run is closed by a survivor; one driver."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.stream.wire import SseReader
from tests.support.servers import serve_subprocess


@pytest.fixture
def two_processes(database_url: str) -> Iterator[tuple[tuple[str, Any], tuple[str, Any]]]:
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_LEASE_SECONDS": "1",
        "REPLAY_DEMO_DELAY_SECONDS": "0.1",
    }
    with serve_subprocess(env) as a, serve_subprocess(env) as b:
        yield a, b


async def _stored(http: httpx.AsyncClient, base: str, run_id: str) -> list[dict[str, Any]]:
    r = await http.get(f"{base}/v1/runs/{run_id}/events", params={"limit": 10_000})
    return [e["chunk"] for e in r.json()["events"]]


async def test_driver_killed_9_then_survivor_closes_run_interrupted_and_reader_ends(
    two_processes: tuple[tuple[str, Any], tuple[str, Any]],
) -> None:
    (base_a, proc_a), (base_b, _) = two_processes
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.post(f"{base_a}/v1/agents/demo/runs", json={"threadId": "th-kill"})
        run_id = r.json()["run_id"]
        reader = SseReader()
        async with http.stream("GET", f"{base_b}/v1/runs/{run_id}/stream") as response:
            chunks = response.aiter_bytes()
            while len(reader.events) < 6:
                reader.feed(await anext(chunks))
            os.kill(proc_a.pid, signal.SIGKILL)
            # The reader on B must end by itself: B reaps the orphaned run.
            async with asyncio.timeout(20):
                async for data in chunks:
                    reader.feed(data)
        received = [json.loads(text) for _, text in reader.events]
        assert received[-1]["type"] == "RUN_ERROR" and received[-1]["code"] == "interrupted"
        run = (await http.get(f"{base_b}/v1/runs/{run_id}")).json()
        assert (run["status"], run["closed"]) == ("interrupted", True)
        assert run["error_code"] == "interrupted"
        # Everything appended before the kill is there, in order, exactly as read.
        assert await _stored(http, base_b, run_id) == received


async def test_two_processes_start_same_run_then_exactly_one_drives_it(
    two_processes: tuple[tuple[str, Any], tuple[str, Any]],
) -> None:
    (base_a, _), (base_b, _) = two_processes
    body = {"runId": "race-drive-1", "threadId": "th-race"}
    async with httpx.AsyncClient(timeout=30) as http:
        answers = await asyncio.gather(
            *(http.post(f"{base}/v1/agents/demo/runs", json=body) for base in (base_a, base_b))
        )
        assert sorted(a.json()["started"] for a in answers) == [False, True]
        async with http.stream("GET", f"{base_a}/v1/runs/race-drive-1/stream") as response:
            reader = SseReader()
            async for data in response.aiter_bytes():
                reader.feed(data)
        types = [json.loads(text)["type"] for _, text in reader.events]
        assert types.count("RUN_STARTED") == 1 and types.count("CUSTOM") == 1
        assert types[-1] == "RUN_FINISHED"


async def test_driver_process_stopped_gracefully_then_run_closed_interrupted_at_once(
    database_url: str,
) -> None:
    env = {"REPLAY_DATABASE_URL": database_url, "REPLAY_DEMO_DELAY_SECONDS": "0.1"}
    async with httpx.AsyncClient(timeout=30) as http:
        with serve_subprocess(env) as (base, proc):
            run_id = (await http.post(f"{base}/v1/agents/demo/runs", json={})).json()["run_id"]
            async with http.stream("GET", f"{base}/v1/runs/{run_id}/stream") as response:
                reader = SseReader()
                chunks = response.aiter_bytes()
                while len(reader.events) < 4:
                    reader.feed(await anext(chunks))
            proc.send_signal(signal.SIGTERM)
            await asyncio.to_thread(proc.wait, 20)
        with serve_subprocess(env) as (base, _):
            run = (await http.get(f"{base}/v1/runs/{run_id}")).json()
            assert (run["status"], run["closed"]) == ("interrupted", True)
            last = (await _stored(http, base, run_id))[-1]
            assert last["type"] == "RUN_ERROR" and "shut down" in last["message"]


async def test_cancel_on_another_process_then_driver_aborts_its_upstream_at_once(
    database_url: str, upstream: tuple[str, Any]
) -> None:
    """The upstream is silent and the lease is 30 s (renewed every 10 s), so only
    the close notification can explain the driver letting go within seconds."""
    base_url, app = upstream
    state = app.state.stalls
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_LEASE_SECONDS": "30",
        "REPLAY_UPSTREAM_IDLE_SECONDS": "60",
        "REPLAY_AGENTS": json.dumps({"slow": f"{base_url}/stalls"}),
    }
    async with httpx.AsyncClient(timeout=30) as http:
        with serve_subprocess(env) as (base_a, _), serve_subprocess(env) as (base_b, _):
            r = await http.post(f"{base_a}/v1/agents/slow/runs", json={})
            run_id = r.json()["run_id"]
            await asyncio.wait_for(state["started"].wait(), 10)
            cancelled = await http.post(
                f"{base_b}/v1/runs/{run_id}/cancel", headers={"Content-Type": "application/json"}
            )
            assert cancelled.json()["status"] == "cancelled"
            await asyncio.wait_for(state["aborted"].wait(), 5)
            events = (await http.get(f"{base_a}/v1/runs/{run_id}/events")).json()["events"]
            assert events[-1]["chunk"]["code"] == "cancelled"
            assert (await http.get(f"{base_a}/v1/runs/{run_id}")).json()["status"] == "cancelled"
