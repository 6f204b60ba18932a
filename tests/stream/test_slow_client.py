"""A client that stops reading holds nobody back and makes the server buffer nothing extra.

Its socket's window is tiny and it reads nothing while the run grows by far
more than the kernel's buffers and the run's shared live buffer hold. The
other follower must keep receiving everything; when the slow one reads again
it must get the whole run exactly once, in order, the part it fell behind on
read from the log by itself (a follower read, not a buffer kept for it).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_replay.log import EventLog
from tests.conftest import settings_for
from tests.stream.conftest import Served, serve_app
from tests.stream.wire import SseReader, dechunk, open_slow_reader

CHUNKS = 5000
PAD = "x" * 2000  # 5,000 chunks of ~2 KB: 10 MB, past the kernel's buffers and the shared one


@pytest.fixture(scope="module")
async def small_buffer(database_url: str) -> AsyncIterator[Served]:
    # A shared live buffer of 512 KiB, so falling behind it is certain.
    settings = settings_for(database_url, stream_buffer_events=256, stream_buffer_bytes=512 << 10)
    async with serve_app(settings) as running:
        yield running


async def test_slow_client_when_it_stops_reading_then_others_unaffected_and_it_resumes_exactly_once(
    small_buffer: Served, event_log: EventLog
) -> None:
    served = small_buffer
    http = httpx.AsyncClient(base_url=served.base_url, timeout=60)
    run = "slow-1"
    await event_log.append(run, [{"type": "A", "n": 0}])
    slow_reader, slow_writer = await open_slow_reader(served.base_url, f"/v1/runs/{run}/stream")
    head = await slow_reader.readuntil(b"\r\n\r\n")
    assert b" 200 " in head.split(b"\r\n")[0] and b"chunked" in head.lower()
    fast = SseReader()
    try:
        async with http.stream("GET", f"/v1/runs/{run}/stream") as response:
            raw = response.aiter_raw()
            while not fast.events:
                fast.feed(await anext(raw))
            before = served.hub.stats()
            for start in range(1, CHUNKS, 250):
                batch = [
                    {"type": "B", "n": n, "pad": PAD}
                    for n in range(start, min(start + 250, CHUNKS))
                ]
                await event_log.append(run, batch)
            # The follower that reads keeps up with everything, the slow one notwithstanding.
            async with asyncio.timeout(60):
                while len(fast.events) < CHUNKS:
                    fast.feed(await anext(raw))
        await event_log.close_run(run)
        # Now the slow client reads: the server ends the response after the last event.
        async with asyncio.timeout(60):
            body = await slow_reader.read()
        slow = SseReader()
        slow.feed(dechunk(body))
        stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, CHUNKS + 1)]
        assert fast.events == stored
        assert slow.events == stored  # exactly once, in order, nothing skipped
        # It fell behind the shared buffer and caught up by reading the log itself.
        assert served.hub.stats().follower_reads > before.follower_reads
    finally:
        slow_writer.close()
        await http.aclose()
