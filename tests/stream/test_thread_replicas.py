"""A thread followed across two service processes sharing one database.

Runs of one thread are started on either process (some at the same moment on
both, some cut before their first event, some left streaming while the next
begins, and two or three at a time open side by side, their appends
alternating between them and between the processes); readers follow the
thread on both processes, cut their connection at random points and resume
with the last id they saw (`Last-Event-ID` or `?offset=`). Each reader's
items, concatenated, must hold the thread as stored: every run announced
once, in the thread's order, before its first event, and each run's events
once, in order, whatever the interleaving between runs.
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
from tests.stream.thread_wire import Item, ThreadNdjsonReader, ThreadSseReader, split_cursor
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


async def _side_by_side(
    http: httpx.AsyncClient, bases: list[str], thread: str, runs: list[str], rng: random.Random
) -> None:
    """Runs made together and left open, appends alternating between them (each on
    either replica), then closed in any order."""
    for run in runs:
        r = await http.put(f"{rng.choice(bases)}/v1/runs/{run}", json={"thread_id": thread})
        assert r.status_code == 201, r.text
    sent = dict.fromkeys(runs, 0)
    for turn in range(rng.randrange(6, 30)):
        run = runs[turn % len(runs)]
        n = rng.choice([1, 1, 3])
        events = [
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": run, "delta": f"{run}/{sent[run] + i}"}
            for i in range(n)
        ]
        r = await http.post(f"{rng.choice(bases)}/v1/runs/{run}/events", json={"events": events})
        assert r.status_code == 200, r.text
        sent[run] += n
        await asyncio.sleep(rng.choice([0, 0.002, 0.01]))
    for run in rng.sample(runs, len(runs)):
        r = await http.post(
            f"{rng.choice(bases)}/v1/runs/{run}/close",
            headers={"Content-Type": "application/json"},
        )
        assert r.status_code == 200, r.text


async def _produce(
    http: httpx.AsyncClient, bases: list[str], thread: str, rng: random.Random
) -> None:
    """The thread's runs: mostly one after the other, sometimes two started together on
    both replicas, sometimes the next started while one still streams, and now and then
    two or three open side by side."""
    running: list[asyncio.Task[None]] = []
    made = 0
    while made < RUNS:
        if rng.random() < 0.3 and RUNS - made >= 2:
            together = min(rng.choice([2, 3]), RUNS - made)
            names = [f"{thread}:{made + i}" for i in range(together)]
            made += together
            await _side_by_side(http, bases, thread, names, random.Random(rng.random()))
            continue
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
    resumes: list[str] | None = None,
) -> tuple[list[Item], int]:
    """Follow until as many items as the stored thread holds have come, cutting the
    connection after a random number of bytes and resuming from the last id."""
    items: list[Item] = []
    connections = 0
    while True:
        headers = {"Accept": "application/x-ndjson"} if mode == "ndjson" else {}
        path = f"{base}/v1/threads/{thread}/stream"
        if items:
            if resumes is not None:
                resumes.append(items[-1][0])
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


def _own(items: list[Item]) -> list[tuple[str, int, str, object]]:
    """Each item's own run and seq (its id's first entry), kind and data (NDJSON sends
    the chunk re-encoded compactly: compared as values)."""
    out: list[tuple[str, int, str, object]] = []
    for cursor, kind, data in items:
        run_id, seq = split_cursor(cursor)
        out.append((run_id, seq, kind, json.loads(data) if kind == "event" else data))
    return out


def _check(items: list[Item], stored: list[Item], what: str) -> None:
    """Every run announced once, in the thread's order, before its events; each run's
    events once and in order; nothing else."""
    got, want = _own(items), _own(stored)
    runs = [run for run, _, kind, _ in want if kind == "run"]
    assert [run for run, _, kind, _ in got if kind == "run"] == runs, what
    for run in runs:
        mine = [g for g in got if g[0] == run]
        assert mine == [w for w in want if w[0] == run], (what, run)
    assert len(got) == len(want), what


async def test_thread_on_two_replicas_when_runs_start_on_either_and_readers_drop_then_exactly_once(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    thread = f"th-rep-{uuid.uuid4().hex[:8]}"
    rng = random.Random("thread-replicas")
    bases = [replicas.a, replicas.b]
    expected: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    modes = ["last-event-id", "offset", "ndjson", "last-event-id"]
    resumes: list[str] = []
    followers = [
        asyncio.create_task(
            _follow(
                http, bases[i % 2], thread, random.Random(rng.random()), modes[i], expected, resumes
            )
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
        _check(items, stored, modes[i])
        assert connections > 3, "the reader was meant to drop and resume many times"
    assert any("~" in cursor for cursor in resumes), "a resume with several runs open"
    # A reader that joins once it is all over gets the thread run after run, on either.
    for base in bases:
        late: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        late.set_result(len(stored))
        async with asyncio.timeout(DEADLINE):
            items, _ = await _follow(http, base, thread, random.Random(1), "ndjson", late)
        assert _own(items) == _own(stored)
