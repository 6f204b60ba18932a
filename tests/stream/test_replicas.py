"""Exactly once end to end, across two service processes sharing one database.

A producer appends 2,000 chunks to process A at an uneven rate; clients read
from process B, cut their connection at random points and resume with
`Last-Event-ID` (or `?offset=`) until the run is closed. What each client
received, concatenated, must be exactly the stored log.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agent_replay.log import EventLog
from tests.stream.wire import NdjsonReader, SseReader
from tests.support.servers import Replicas, serve_replicas

TOTAL = 2000
DEADLINE = 90.0


@pytest.fixture(scope="module")
def replicas(database_url: str) -> Iterator[Replicas]:
    with serve_replicas(database_url) as both:
        yield both


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=200)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        yield client


async def _produce(http: httpx.AsyncClient, base: str, run: str, rng: random.Random) -> None:
    sent = 0
    while sent < TOTAL:
        n = min(rng.choice([1, 1, 1, 2, 3, 5, 8, 40]), TOTAL - sent)
        events = [
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m",
                "delta": f"{sent + i}:" + "x" * rng.randrange(60),
            }
            for i in range(n)
        ]
        r = await http.post(f"{base}/v1/runs/{run}/events", json={"events": events})
        assert r.status_code == 200, r.text
        sent += n
        # An uneven rate: bursts, short gaps, and now and then a quiet spell.
        pause = rng.choice([0, 0, 0, 0.001, 0.003, 0.02])
        if pause:
            await asyncio.sleep(pause)
    assert (
        await http.post(f"{base}/v1/runs/{run}/close", headers={"Content-Type": "application/json"})
    ).status_code == 200


async def _follow(
    http: httpx.AsyncClient, base: str, run: str, rng: random.Random, *, mode: str
) -> tuple[list[tuple[int, str]], int]:
    """Read until the run ends, cutting the connection after a random number of bytes."""
    received: list[tuple[int, str]] = []
    connections = 0
    while True:
        last = received[-1][0] if received else None
        headers = {"Accept": "application/x-ndjson"} if mode == "ndjson" else {}
        params: dict[str, str] = {}
        if last is not None:
            if mode == "offset":
                params["offset"] = str(last)
            else:
                headers["Last-Event-ID"] = str(last)
        reader: SseReader | NdjsonReader = NdjsonReader() if mode == "ndjson" else SseReader()
        budget = rng.randrange(1, 12_000)
        ended = False
        connections += 1
        async with http.stream(
            "GET", f"{base}/v1/runs/{run}/stream", headers=headers, params=params
        ) as r:
            if r.status_code == 204:
                return received, connections
            assert r.status_code == 200, (await r.aread()).decode()
            got = 0
            async for data in r.aiter_raw():
                received.extend(reader.feed(data))
                got += len(data)
                if got >= budget:
                    break
            else:
                ended = True
        if ended:
            return received, connections


async def _check(event_log: EventLog, run: str, received: list[tuple[int, str]], mode: str) -> None:
    stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, TOTAL + 1)]
    assert len(stored) == TOTAL
    if mode == "ndjson":
        import json

        stored = [(s, json.dumps(json.loads(c), separators=(",", ":"))) for s, c in stored]
    assert [seq for seq, _ in received] == list(range(1, TOTAL + 1))
    assert received == stored


@pytest.mark.parametrize("mode", ["last-event-id", "offset"])
async def test_replicas_when_client_drops_and_resumes_then_exactly_the_stored_log(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog, mode: str
) -> None:
    run = f"rep-one-{mode}"
    rng = random.Random(f"one-{mode}")
    # The run exists before the client arrives (the client reads from B, the producer writes to A).
    assert (
        await http.put(f"{replicas.a}/v1/runs/{run}", headers={"Content-Type": "application/json"})
    ).status_code == 201
    async with asyncio.timeout(DEADLINE):
        received, connections = (
            await asyncio.gather(
                _follow(http, replicas.b, run, random.Random(rng.random()), mode=mode),
                _produce(http, replicas.a, run, random.Random(rng.random())),
            )
        )[0]
    assert connections > 5, "the client was meant to drop and resume many times"
    await _check(event_log, run, received, mode)


async def test_replicas_when_50_clients_drop_and_resume_then_each_gets_the_stored_log(
    replicas: Replicas, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    run = "rep-fifty"
    rng = random.Random("fifty")
    assert (
        await http.put(f"{replicas.a}/v1/runs/{run}", headers={"Content-Type": "application/json"})
    ).status_code == 201
    modes = ["last-event-id", "offset", "ndjson"]
    followers = [
        _follow(http, replicas.b, run, random.Random(rng.random()), mode=modes[i % 3])
        for i in range(50)
    ]
    async with asyncio.timeout(DEADLINE):
        *results, _ = await asyncio.gather(
            *followers, _produce(http, replicas.a, run, random.Random(rng.random()))
        )
    for i, (received, _) in enumerate(results):
        await _check(event_log, run, received, modes[i % 3])
