"""Catch-up prefetch: the next page is read while the current one is written.

Whether the prefetch is used, overtaken by the shared buffer, or abandoned by
a follower that leaves, every event arrives once, in order, and no read is
left running.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from service.log import EventLog
from service.stream import Encoding, Hub, Limits, plan_stream, tail
from tests.stream.wire import SseReader

DEADLINE = 10.0


@pytest.fixture(scope="module")
async def log_and_hub(database_url: str) -> AsyncIterator[tuple[EventLog, Hub]]:
    event_log = await EventLog.open(database_url, pool_size=4)
    hub = Hub(event_log.pool, None, limits=Limits(page_size=5, buffer_events=8), listen=False)
    await hub.start()
    remove = event_log.on_commit(hub.announce)
    yield event_log, hub
    remove()
    await hub.stop()
    await event_log.close()


def _prefetches() -> list[asyncio.Task[object]]:
    return [
        t
        for t in asyncio.all_tasks()
        if not t.done() and "read_page" in repr(t.get_coro()) and t is not asyncio.current_task()
    ]


async def test_catch_up_when_many_pages_then_each_event_once_in_order(
    log_and_hub: tuple[EventLog, Hub],
) -> None:
    event_log, hub = log_and_hub
    await event_log.append("pf-1", [{"type": "A", "n": i} for i in range(23)], close=True)
    stored = [(e.seq, e.chunk) for e in await event_log.read_events("pf-1")]
    for start in (0, 3, 5, 22):
        reader = SseReader()
        reads = hub.stats().follower_reads
        plan = await plan_stream(hub, "pf-1", start)
        async with asyncio.timeout(DEADLINE):
            async for blob in tail(hub, plan, Encoding.SSE):
                reader.feed(blob)
                await asyncio.sleep(0)  # let the prefetch run ahead of the write
        assert reader.events == stored[start:]
        # One read per page, prefetched or not: ceil(remaining / 5), at least one.
        assert hub.stats().follower_reads - reads == max(1, -(-(23 - start) // 5))
    assert _prefetches() == []


async def test_catch_up_when_follower_leaves_mid_replay_then_prefetch_cancelled(
    log_and_hub: tuple[EventLog, Hub],
) -> None:
    event_log, hub = log_and_hub
    await event_log.append("pf-2", [{"type": "A", "n": i} for i in range(30)], close=True)
    plan = await plan_stream(hub, "pf-2", 0)
    stream = tail(hub, plan, Encoding.SSE)
    async with asyncio.timeout(DEADLINE):
        first = await anext(stream)
        assert first.startswith(b"id: 1\n")
        await stream.aclose()
        # Cancellation lands at the task's next step.
        while _prefetches():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    assert hub.stats().subscribers == 0


async def test_catch_up_when_live_appends_interleave_then_each_event_once_in_order(
    log_and_hub: tuple[EventLog, Hub],
) -> None:
    event_log, hub = log_and_hub
    await event_log.append("pf-3", [{"type": "A", "n": i} for i in range(12)])
    plan = await plan_stream(hub, "pf-3", 0)
    reader = SseReader()
    async with asyncio.timeout(DEADLINE):
        stream = tail(hub, plan, Encoding.SSE)
        reader.feed(await anext(stream))
        # Appended while the follower is mid catch-up with a prefetch in flight:
        # the channel buffers them, and the follower may take either source.
        for i in range(4):
            await event_log.append("pf-3", [{"type": "B", "n": i}] * 3)
        await event_log.close_run("pf-3")
        async for blob in stream:
            reader.feed(blob)
    stored = [(e.seq, e.chunk) for e in await event_log.read_events("pf-3")]
    assert reader.events == stored
    assert _prefetches() == []
