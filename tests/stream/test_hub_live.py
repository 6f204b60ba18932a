"""The hub in a running service: LISTEN loss, read once / fan out, detach."""

from __future__ import annotations

import asyncio
import random

import asyncpg
import httpx

from agent_replay.log import EventLog
from tests.stream.conftest import Served, wait_for
from tests.stream.wire import SseReader

DEADLINE = 30.0


async def test_tail_when_listen_connection_terminated_then_continues_with_nothing_lost(
    served: Served, http: httpx.AsyncClient, event_log: EventLog, database_url: str
) -> None:
    hub = served.hub
    before = hub.stats()
    assert before.listening and before.listener_pid is not None
    await event_log.append("h-kill", [{"type": "A", "n": i} for i in range(5)])
    reader = SseReader()
    async with http.stream("GET", "/v1/runs/h-kill/stream") as response:
        raw = response.aiter_raw()
        async with asyncio.timeout(DEADLINE):
            while len(reader.events) < 5:
                reader.feed(await anext(raw))
            admin = await asyncpg.connect(database_url)
            try:
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", before.listener_pid)
            finally:
                await admin.close()
            # Appended while the hub has no LISTEN connection: no notification reaches it.
            await event_log.append("h-kill", [{"type": "B", "n": i} for i in range(5)])
            while len(reader.events) < 10:
                reader.feed(await anext(raw))
            await wait_for(lambda: hub.stats().connects > before.connects, "reconnect")
            after = hub.stats()
            assert after.listening and after.listener_pid != before.listener_pid
            # Live again through the new connection.
            await event_log.append("h-kill", [{"type": "C"}], close=True)
            async for data in raw:
                reader.feed(data)
    stored = [(e.seq, e.chunk) for e in await event_log.read_events("h-kill")]
    assert reader.events == stored


async def test_fan_out_when_many_followers_then_one_read_per_wakeup(
    served: Served, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    hub = served.hub
    await event_log.append("h-fan", [{"type": "A"}])
    followers = 25
    readers = [SseReader() for _ in range(followers)]
    streams = [http.stream("GET", "/v1/runs/h-fan/stream") for _ in range(followers)]
    responses = [await s.__aenter__() for s in streams]
    raws = [r.aiter_raw() for r in responses]

    async def until(count: int) -> None:
        async def one(reader: SseReader, raw: object) -> None:
            while len(reader.events) < count:
                reader.feed(await anext(raw))  # type: ignore[call-overload]

        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*(one(r, raw) for r, raw in zip(readers, raws, strict=True)))

    try:
        await until(1)
        before = hub.stats()
        appends = 20
        for i in range(appends):
            await event_log.append("h-fan", [{"type": "B", "n": i}])
            await until(2 + i)
        after = hub.stats()
        # Caught-up followers are served from the channel's reads alone:
        # at most one read per append, not one per follower per append.
        assert after.follower_reads == before.follower_reads
        assert 0 < after.reads - before.reads <= appends
        stored = [(e.seq, e.chunk) for e in await event_log.read_events("h-fan")]
        assert all(r.events == stored for r in readers)
    finally:
        for s in streams:
            await s.__aexit__(None, None, None)


async def test_detach_when_clients_disconnect_then_resources_released_and_run_unaffected(
    served: Served, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    hub = served.hub
    pool = served.app.state.replay.log.pool
    # A backlog big enough that some clients leave mid catch-up.
    for _ in range(5):
        await event_log.append("h-detach", [{"type": "A", "pad": "x" * 200}] * 1000)
    # Warm up: sse-starlette starts one process-wide shutdown watcher task on first use.
    async with http.stream("GET", "/v1/runs/h-detach/stream", params={"offset": "now"}) as r:
        await anext(r.aiter_raw())
    await wait_for(lambda: hub.stats().subscribers == 0, "warm-up released")
    tasks_before = len(asyncio.all_tasks())
    rng = random.Random(7)

    async def visit() -> None:
        async with http.stream("GET", "/v1/runs/h-detach/stream") as response:
            budget = rng.randrange(1, 600_000)
            got = 0
            async for data in response.aiter_raw():
                got += len(data)
                if got >= budget:
                    break

    async with asyncio.timeout(DEADLINE):
        await asyncio.gather(*(visit() for _ in range(30)))
    await wait_for(
        lambda: (
            hub.stats().subscribers == 0
            and hub.stats().channels == 0
            and pool.get_idle_size() == pool.get_size()
            and len(asyncio.all_tasks()) <= tasks_before
        ),
        "resources released",
    )
    run = await event_log.get_run("h-detach")
    assert run.status == "running" and not run.closed
    result = await event_log.append("h-detach", [{"type": "B"}])
    assert result.last_seq == 5001
