"""A thread followed across two service processes sharing one database.

Runs of one thread are started on either process (some at the same moment on
both, some cut before their first event, some left streaming while the next
begins); readers follow the thread on both processes, cut their connection at
random points and resume with `Last-Event-ID` (or `?offset=`). Each reader's
items, concatenated, must be exactly the thread as stored: every run in the
thread's order, announced once, then each of its events once, in order.
"""

from __future__ import annotations

import asyncio
import json
import random
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agent_replay.log import EventLog
from tests.stream.thread_wire import Item, ThreadNdjsonReader, ThreadSseReader
from tests.support.servers import Replicas, serve_replicas

DEADLINE = 120.0
RUNS = 14


@pytest.fixture(scope="module")
def replicas(database_url: str) -> Iterator[Replicas]:
    with serve_replicas(database_url) as both:
        yield both


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=100)) as client:
        yield client


async def _run(
    http: httpx.AsyncClient, bases: list[str], thread: str, run: str, rng: random.Random
) -> None:
    """One run: made on one replica, its events appended to either, closed."""
    r = await http.put(f"{rng.choice(bases)}/v1/runs/{run}", json={"thread_id": thread})
    assert r.status_code == 201, r.text
    total = rng.choice([0, 0, 1, 5, 30, 120])  # 0: accepted, then cut before any event
    sent = 0
    while sent < total:
        n = min(rng.choice([1, 1, 2, 7, 20]), total - sent)
        events = [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": run, "delta": f"{run}/{sent + i}"}
            for i in range(n)
        ]
        r = await http.post(f"{rng.choice(bases)}/v1/runs/{run}/events", json={"events": events})
        assert r.status_code == 200, r.text
        sent += n
        await asyncio.sleep(rng.choice([0, 0, 0.002, 0.01]))
    r = await http.post(
        f"{rng.choice(bases)}/v1/runs/{run}/close", headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text


async def _produce(
    http: httpx.AsyncClient, bases: list[str], thread: str, rng: random.Random
) -> None:
    """The thread's runs: mostly one after the other, sometimes two started together on
    both replicas, sometimes the next started while one still streams."""
    running: list[asyncio.Task[None]] = []
    made = 0
    while made < RUNS:
        together = min(rng.choice([1, 1, 2]), RUNS - made)
        batch = [
            asyncio.create_task(
                _run(http, bases, thread, f"{thread}:{made + i}", random.Random(rng.random()))
            )
            for i in range(together)
        ]
        made += together
        running.extend(batch)
        if rng.random() < 0.6:
            await asyncio.gather(*batch)
        else:
            await asyncio.sleep(rng.choice([0, 0.005, 0.05]))
    await asyncio.gather(*running)


async def _follow(
    http: httpx.AsyncClient,
    base: str,
    thread: str,
    rng: random.Random,
    mode: str,
    expected: asyncio.Future[int],
) -> tuple[list[Item], int]:
    """Follow until as many items as the stored thread holds have come, cutting the
    connection after a random number of bytes and resuming from the last id."""
    items: list[Item] = []
    connections = 0
    while True:
        headers = {"Accept": "application/x-ndjson"} if mode == "ndjson" else {}
        path = f"{base}/v1/threads/{thread}/stream"
        if items:
            if mode == "offset":
                path += f"?offset={items[-1][0]}"
            else:
                headers["Last-Event-ID"] = items[-1][0]
        reader = ThreadNdjsonReader() if mode == "ndjson" else ThreadSseReader()
        budget = rng.randrange(1, 6_000)
        connections += 1
        async with http.stream("GET", path, headers=headers) as r:
            assert r.status_code == 200, (await r.aread()).decode()
            got = 0
            async for data in r.aiter_raw():
                items.extend(reader.feed(data))
                if expected.done() and len(items) >= expected.result():
                    return items, connections
                got += len(data)
                if got >= budget:
                    break


async def _stored(event_log: EventLog, thread: str) -> list[Item]:
    """The thread as the log holds it, in the thread's order, as a reader should see it."""
    out: list[Item] = []
    records = await event_log.thread_records(thread)
    ordered = await event_log.thread_runs(thread, None, 1000)
    assert [r.run_id for r in records] == [r.run_id for r in ordered]
    for record in records:
        out.append((f"{record.run_id}:0", "run", record.run_id))
        for event in await event_log.read_events(record.run_id, 0, 10_000):
            out.append((f"{record.run_id}:{event.seq}", "event", event.chunk))
    return out


def _comparable(items: list[Item]) -> list[tuple[str, str, object]]:
    # NDJSON sends the chunk re-encoded compactly: compared as values.
    return [(c, k, json.loads(d) if k == "event" else d) for c, k, d in items]


async def test_thread_on_two_replicas_when_runs_start_on_either_and_readers_drop_then_exactly_once(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    thread = f"th-rep-{uuid.uuid4().hex[:8]}"
    rng = random.Random("thread-replicas")
    bases = [replicas.a, replicas.b]
    expected: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    modes = ["last-event-id", "offset", "ndjson", "last-event-id"]
    followers = [
        asyncio.create_task(
            _follow(http, bases[i % 2], thread, random.Random(rng.random()), modes[i], expected)
        )
        for i in range(len(modes))
    ]
    async with asyncio.timeout(DEADLINE):
        await _produce(http, bases, thread, random.Random(rng.random()))
        stored = await _stored(event_log, thread)
        expected.set_result(len(stored))
        results = await asyncio.gather(*followers)
    assert len([item for item in stored if item[1] == "run"]) == RUNS
    for i, (items, connections) in enumerate(results):
        assert _comparable(items) == _comparable(stored), modes[i]
        assert connections > 3, "the reader was meant to drop and resume many times"
    # A reader that joins once it is all over gets the same from the start, on either.
    for base in bases:
        late: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        late.set_result(len(stored))
        async with asyncio.timeout(DEADLINE):
            items, _ = await _follow(http, base, thread, random.Random(1), "ndjson", late)
        assert _comparable(items) == _comparable(stored)
