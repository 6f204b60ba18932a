"""Disconnect policies across two real replicas: who reads a run is counted in the log.

The upstream is a real AG-UI HTTP agent on loopback that streams a delta every
50 ms for as long as its run's `forwardedProps.seconds` says, and records per
run whether it finished or its client (the driver) went away before: an abort
is what the upstream saw, never inferred from the service's answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.agents.upstreams import sse
from tests.stream.wire import SseReader
from tests.support.servers import serve_asgi, serve_subprocess

GRACE = 2.0
# The paced upstream's time between deltas.
DELTA_SECONDS = 0.05
LEASE = 1.5  # renewed (and readers heartbeated) every 0.5 s; a row is stale after 1.5 s
# The first-reader window of a `cancel` run, set below its default (10 s).
FIRST_READER = 5.0
# A second pair of replicas whose drivers poll their readers only every 15 s (a
# third of the lease) and give a first reader a minute: whatever they do sooner
# was told to them, not found by a poll.
SLOW_LEASE = 45.0
SLOW_POLL = SLOW_LEASE / 3


class Upstream:
    def __init__(self) -> None:
        self.started: dict[str, asyncio.Event] = {}
        self.aborted: dict[str, asyncio.Event] = {}
        # A run started with `forwardedProps.hold` streams until the test releases it.
        self.released: dict[str, asyncio.Event] = {}
        self.finished: set[str] = set()

    def event(self, table: dict[str, asyncio.Event], run_id: str) -> asyncio.Event:
        return table.setdefault(run_id, asyncio.Event())

    async def paced(self, request: Request) -> Response:
        body = await request.json()
        run_id, thread_id = body["runId"], body["threadId"]
        props = body.get("forwardedProps") or {}
        seconds = float(props.get("seconds", 3))
        released = self.event(self.released, run_id) if props.get("hold") else None
        self.event(self.started, run_id).set()

        async def stream() -> AsyncIterator[bytes]:
            done = False
            try:
                yield sse({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
                yield sse({"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"})
                deadline = time.monotonic() + seconds
                i = 0
                while time.monotonic() < deadline and not (released and released.is_set()):
                    await asyncio.sleep(DELTA_SECONDS)
                    i += 1
                    yield sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{i} "})
                yield sse({"type": "TEXT_MESSAGE_END", "messageId": "m"})
                yield sse({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})
                done = True
                self.finished.add(run_id)
            finally:
                if not done:  # the client went away mid-stream: the run was aborted
                    self.event(self.aborted, run_id).set()

        return StreamingResponse(stream(), media_type="text/event-stream")


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[tuple[str, Upstream]]:
    agent = Upstream()
    app = Starlette(routes=[Route("/paced", agent.paced, methods=["POST"])])
    async with serve_asgi(app) as base:
        yield base, agent


def _env(
    database_url: str, base: str, lease: float = LEASE, first_reader: float = FIRST_READER
) -> dict[str, str]:
    """A replica's settings: the test database, a short lease, the upstream's agents."""
    return {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_LEASE_SECONDS": str(lease),
        "REPLAY_FIRST_READER_SECONDS": str(first_reader),
        "REPLAY_AGENTS": _agents(base),
    }


def _agents(base: str) -> str:
    url = f"{base}/paced"
    return json.dumps(
        {
            "paced": url,
            "paced-cancel": {"url": url, "on_disconnect": {"policy": "cancel"}},
            "paced-grace": {
                "url": url,
                "on_disconnect": {"policy": "cancel_after", "grace_seconds": GRACE},
            },
        }
    )


@pytest.fixture(scope="module")
def replicas(database_url: str, upstream: tuple[str, Upstream]) -> Iterator[tuple[str, str]]:
    env = _env(database_url, upstream[0])
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield a, b


@pytest.fixture(scope="module")
def slow_replicas(database_url: str, upstream: tuple[str, Upstream]) -> Iterator[tuple[str, str]]:
    env = _env(database_url, upstream[0], lease=SLOW_LEASE, first_reader=60)
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield a, b


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


@pytest.fixture
def agent(upstream: tuple[str, Upstream]) -> Upstream:
    return upstream[1]


async def _start(
    http: httpx.AsyncClient, base: str, agent: str, seconds: float, **kwargs: Any
) -> str:
    body = {"forwardedProps": {"seconds": seconds}, **kwargs.pop("json", {})}
    r = await http.post(f"{base}/v1/agents/{agent}/runs", json=body, **kwargs)
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    return run_id


async def _read(
    http: httpx.AsyncClient, base: str, run_id: str, events: int, after: int = 0
) -> list[int]:
    """Follow the run until `events` more events came, then hang up. Returns their seqs."""
    reader = SseReader()
    headers = {"Last-Event-ID": str(after)} if after else {}
    async with http.stream("GET", f"{base}/v1/runs/{run_id}/stream", headers=headers) as r:
        assert r.status_code == 200
        chunks = r.aiter_bytes()
        while len(reader.events) < events:
            reader.feed(await anext(chunks))
    return [seq for seq, _ in reader.events]


async def _follow_to_end(
    http: httpx.AsyncClient, base: str, run_id: str, after: int
) -> list[dict[str, Any]]:
    reader = SseReader()
    headers = {"Last-Event-ID": str(after)}
    async with http.stream("GET", f"{base}/v1/runs/{run_id}/stream", headers=headers) as r:
        async for data in r.aiter_bytes():
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(
        range(after + 1, after + 1 + len(reader.events))
    )
    return [json.loads(text) for _, text in reader.events]


async def _closed(http: httpx.AsyncClient, base: str, run_id: str) -> dict[str, Any]:
    async with asyncio.timeout(30):
        while True:
            run: dict[str, Any] = (await http.get(f"{base}/v1/runs/{run_id}")).json()
            if run["closed"]:
                return run
            await asyncio.sleep(0.1)


async def _until(
    http: httpx.AsyncClient, base: str, run_id: str, condition: Callable[[dict[str, Any]], Any]
) -> dict[str, Any]:
    """The run's record once `condition` holds for it."""
    async with asyncio.timeout(30):
        while True:
            run: dict[str, Any] = (await http.get(f"{base}/v1/runs/{run_id}")).json()
            if condition(run):
                return run
            await asyncio.sleep(0.05)


async def _last_event(http: httpx.AsyncClient, base: str, run_id: str) -> dict[str, Any]:
    r = await http.get(f"{base}/v1/runs/{run_id}/events", params={"limit": 10_000})
    chunk: dict[str, Any] = r.json()["events"][-1]["chunk"]
    return chunk


async def _listed(http: httpx.AsyncClient, base: str, **params: str) -> list[str]:
    """Every run id `GET /v1/runs` lists for `params`, all pages."""
    found: list[str] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": "500", **({"cursor": cursor} if cursor else {})}
        r = await http.get(f"{base}/v1/runs", params=query)
        assert r.status_code == 200, r.text
        found += [run["run_id"] for run in r.json()["runs"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return found


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def test_cancel_after_when_only_reader_leaves_then_cancelled_after_grace_and_upstream_aborted(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = replicas
    # Started on A with the body's policy, read on B: the reader's leave is B's to tell.
    run_id = await _start(
        http,
        a,
        "paced",
        60,
        json={"onDisconnect": {"policy": "cancel_after", "grace_seconds": GRACE}},
    )
    await _read(http, b, run_id, 5)
    run = await _closed(http, a, run_id)
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), 10)
    assert run_id not in agent.finished
    assert run["status"] == "cancelled"
    assert run["on_disconnect"]["policy"] == "cancel_after"
    assert run["on_disconnect"]["grace_seconds"] == GRACE
    left = _at(run["on_disconnect"]["reader_left_at"])
    # Not before the grace ran out, counted from when the reader left.
    assert (_at(run["closed_at"]) - left).total_seconds() >= GRACE
    last = await _last_event(http, b, run_id)
    assert (last["type"], last["code"]) == ("RUN_ERROR", "abandoned")
    # The reason is the run's: in its record, the audit filter, its transcript.
    assert run["error_code"] == "abandoned"
    abandoned = await _listed(http, b, error_code="abandoned", agent="paced")
    assert run_id in abandoned
    assert run_id not in await _listed(http, b, error_code="cancelled", agent="paced")
    transcript = await http.get(f"{b}/v1/runs/{run_id}/transcript")
    assert transcript.status_code == 200
    assert "| cancelled (abandoned) |" in transcript.text
    assert "(code abandoned)" in transcript.text


async def test_cancel_after_when_reader_reconnects_to_other_replica_within_grace_then_runs_to_end(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = replicas
    # Held open by the upstream until released below, so it is still running once the
    # grace has run out; a grace several leases long, so a replica slowed by a loaded
    # machine (a late heartbeat) cannot pass for a reader that left.
    grace = 4 * LEASE
    run_id = await _start(
        http, a, "paced", 60, json={"forwardedProps": {"seconds": 60, "hold": True}},
        headers={"X-On-Disconnect": f"cancel_after={grace:g}"},
    )  # fmt: skip
    seen = await _read(http, a, run_id, 5)
    # The reader really left (the log recorded it), and is back on B at once.
    left = await _until(http, a, run_id, lambda run: run["on_disconnect"]["reader_left_at"])
    assert not left["closed"]
    left_at = _at(left["on_disconnect"]["reader_left_at"])
    follower = asyncio.create_task(_follow_to_end(http, b, run_id, after=seen[-1]))
    # A second run on A with the same policy, whose reader leaves a lease's worth of the
    # upstream's deltas later and does not come back: once A's driver has cancelled it,
    # this run's grace, and a lease more, ran out and was judged too. Still running.
    control = await _start(
        http, a, "paced", 60, headers={"X-On-Disconnect": f"cancel_after={grace:g}"}
    )
    await _read(http, a, control, 5 + int(LEASE / DELTA_SECONDS))
    cancelled = await _closed(http, a, control)
    assert cancelled["error_code"] == "abandoned"
    control_left = _at(cancelled["on_disconnect"]["reader_left_at"])
    assert control_left >= left_at + timedelta(seconds=LEASE)
    assert not follower.done(), "the follower on B ended while the run was held"
    assert not (await http.get(f"{a}/v1/runs/{run_id}")).json()["closed"]
    agent.event(agent.released, run_id).set()
    rest = await asyncio.wait_for(follower, 30)
    assert rest[-1]["type"] == "RUN_FINISHED"
    run = await _closed(http, a, run_id)
    assert (run["status"], run["error_code"]) == ("finished", None)
    assert run["on_disconnect"]["reader_left_at"] == left["on_disconnect"]["reader_left_at"]
    assert run_id in agent.finished and not agent.event(agent.aborted, run_id).is_set()


async def test_cancel_when_last_reader_leaves_then_cancelled_without_grace(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = replicas
    run_id = await _start(http, a, "paced-cancel", 60)
    await _read(http, b, run_id, 5)
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), 10)
    run = await _closed(http, a, run_id)
    assert run["status"] == "cancelled" and run["on_disconnect"] == {
        "policy": "cancel", "reader_left_at": run["on_disconnect"]["reader_left_at"]
    }  # fmt: skip
    assert run["on_disconnect"]["reader_left_at"] is not None
    assert (await _last_event(http, a, run_id))["code"] == "abandoned"
    assert run["error_code"] == "abandoned"


async def test_cancel_when_last_reader_leaves_on_other_replica_then_told_at_once_not_at_a_poll(
    slow_replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = slow_replicas
    run_id = await _start(http, a, "paced-cancel", 60)
    await _read(http, b, run_id, 5)
    gone = time.monotonic()
    # A's driver last looked at start and looks again a poll later; B's notice
    # reaches it long before that.
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), SLOW_POLL)
    assert time.monotonic() - gone < SLOW_POLL / 2
    run = await _closed(http, a, run_id)
    assert (run["status"], run["error_code"]) == ("cancelled", "abandoned")
    assert run_id not in agent.finished


async def test_cancel_after_when_reader_leaves_then_cancelled_when_grace_ends_not_at_a_poll(
    slow_replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = slow_replicas
    run_id = await _start(http, a, "paced-grace", 60)
    await _read(http, b, run_id, 5)
    gone = time.monotonic()
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), GRACE + SLOW_POLL)
    assert time.monotonic() - gone < GRACE + SLOW_POLL / 2
    run = await _closed(http, a, run_id)
    left = _at(run["on_disconnect"]["reader_left_at"])
    assert (_at(run["closed_at"]) - left).total_seconds() >= GRACE
    assert (run["status"], run["error_code"]) == ("cancelled", "abandoned")


async def test_cancel_when_never_followed_then_cancelled_after_the_configured_first_reader_window(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, _ = replicas
    run_id = await _start(http, a, "paced-cancel", 60)
    run = await _closed(http, a, run_id)
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), 10)
    assert run["status"] == "cancelled" and run["on_disconnect"]["reader_left_at"] is None
    unread = (_at(run["closed_at"]) - _at(run["created_at"])).total_seconds()
    # Not before REPLAY_FIRST_READER_SECONDS, and not the default's 10 s either.
    assert FIRST_READER <= unread < 10
    assert run["error_code"] == "abandoned"


async def test_continue_when_nobody_reads_then_runs_to_end(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, b = replicas
    run_id = await _start(http, a, "paced", 3 * GRACE)
    await _read(http, b, run_id, 3)
    run = await _closed(http, a, run_id)
    assert run["status"] == "finished"
    assert run["on_disconnect"] == {"policy": "continue", "reader_left_at": None}
    assert run_id in agent.finished


async def test_cancel_after_when_never_followed_then_cancelled_by_grace_from_start(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Upstream
) -> None:
    a, _ = replicas
    run_id = await _start(http, a, "paced-grace", 60)
    run = await _closed(http, a, run_id)
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), 10)
    assert run["status"] == "cancelled" and run["on_disconnect"]["reader_left_at"] is None
    assert (_at(run["closed_at"]) - _at(run["created_at"])).total_seconds() >= GRACE
    assert (await _last_event(http, a, run_id))["code"] == "abandoned"


async def test_cancel_after_when_replica_holding_last_reader_dies_then_cancelled(
    database_url: str,
    upstream: tuple[str, Upstream],
    replicas: tuple[str, str],
    http: httpx.AsyncClient,
    agent: Upstream,
) -> None:
    """The reader's replica is killed -9: nobody says it left; its row goes stale."""
    a, _ = replicas
    with serve_subprocess(_env(database_url, upstream[0])) as (c, proc):
        run_id = await _start(http, a, "paced-grace", 60)
        reader = SseReader()
        async with http.stream("GET", f"{c}/v1/runs/{run_id}/stream") as r:
            chunks = r.aiter_bytes()
            while len(reader.events) < 5:
                reader.feed(await anext(chunks))
            # Read a lease's worth of the upstream's deltas more, then past the grace from
            # the start: once a run started on A after that, never followed, with the same
            # policy, has been cancelled, A's driver has judged this one after its grace
            # too. The reader kept it alive.
            while len(reader.events) < 5 + int(LEASE / DELTA_SECONDS):
                reader.feed(await anext(chunks))
            control = await _start(http, a, "paced-grace", 60)
            assert (await _closed(http, a, control))["error_code"] == "abandoned"
            assert not (await http.get(f"{a}/v1/runs/{run_id}")).json()["closed"]
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    run = await _closed(http, a, run_id)
    await asyncio.wait_for(agent.event(agent.aborted, run_id).wait(), 10)
    assert run["status"] == "cancelled"
    assert run["on_disconnect"]["reader_left_at"] is not None
    assert (await _last_event(http, a, run_id))["code"] == "abandoned"


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"onDisconnect": {"policy": "stop"}}, {}),
        ({"onDisconnect": {"policy": "cancel_after"}}, {}),
        ({"onDisconnect": {"policy": "cancel_after", "grace_seconds": -1}}, {}),
        ({"onDisconnect": {"policy": "cancel", "grace_seconds": 3}}, {}),
        ({"onDisconnect": {"policy": "cancel", "extra": 1}}, {}),
        ({"onDisconnect": 30}, {}),
        ({}, {"X-On-Disconnect": "cancel_after"}),
        ({}, {"X-On-Disconnect": "cancel_after=soon"}),
        ({}, {"X-On-Disconnect": "cancel=3"}),
        ({"onDisconnect": "cancel"}, {"X-On-Disconnect": "continue"}),
    ],
)
async def test_start_when_on_disconnect_invalid_then_422_and_no_run(
    replicas: tuple[str, str],
    http: httpx.AsyncClient,
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    a, _ = replicas
    run_id = f"bad-policy-{abs(hash(json.dumps([body, headers])))}"
    for path in ("/v1/agents/paced/runs", "/v1/agents/paced/ag-ui", "/v1/chat/paced"):
        r = await http.post(f"{a}{path}", json={**body, "runId": run_id}, headers=headers)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["code"] == "invalid_on_disconnect"
    r = await http.post(
        f"{a}/v1/ai-sdk/paced", json={"id": "chat-bad", "messages": [], **body}, headers=headers
    )
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_on_disconnect"
    assert (await http.get(f"{a}/v1/runs/{run_id}")).status_code == 404
