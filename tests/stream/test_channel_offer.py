"""A channel given this process's committed rows (`Hub.committed`) keeps exactly the log.

The committer hands the hub each commit's rows; the channel buffers them only
when they continue its buffer, and otherwise reads the log. Whatever order
the rows come in (late, early, twice), the buffer must hold every event after
its anchor once, in order, as stored: served to a follower at any cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import uuid
from collections.abc import AsyncIterator

import pytest

from agent_replay.log import EventLog
from agent_replay.log.values import RunState
from agent_replay.stream import Encoding, Hub
from agent_replay.stream.channel import Batch
from agent_replay.stream.framing import Row
from tests.stream.wire import SseReader

DEADLINE = 10.0


@pytest.fixture
async def event_log(database_url: str) -> AsyncIterator[EventLog]:
    log = await EventLog.open(database_url, pool_size=4)
    yield log
    await log.close()


# Offers of three commits (0, 1, 2), in these orders: in order, late, early, twice.
ORDERS = [(0, 1, 2), (1, 0, 2), (2, 1, 0), (0, 0, 1, 2, 1), (2, 0, 1, 2), (0, 2)]


@pytest.mark.parametrize("order", ORDERS)
async def test_offer_when_rows_come_in_any_order_then_buffer_holds_the_log_once(
    event_log: EventLog, order: tuple[int, ...]
) -> None:
    run = f"offer-{uuid.uuid4().hex[:10]}"
    await event_log.append(run, [{"type": "A", "n": i} for i in range(3)])
    commits: list[tuple[list[Row] | None, int, bool]] = []
    remove = event_log.on_commit_rows(
        lambda run_id, rows, last, closed: (
            commits.append((rows, last, closed)) if run_id == run else None
        )
    )
    try:
        await event_log.append(run, [{"type": "B", "s": "caf\u00e9"}, {"type": "B"}])
        await event_log.append(run, [{"type": "C"}])
        await event_log.append(run, [{"type": "D"}], close=True)
    finally:
        remove()
    assert [last for _, last, _ in commits] == [5, 6, 7]
    hub = Hub(event_log, listen=False)
    try:
        with hub.subscribe(run) as sub:
            channel = sub.channel
            channel.anchor(RunState(3, False))  # the log as a read found it at seq 3
            async with asyncio.timeout(DEADLINE):
                for index in order:
                    rows, last, closed = commits[index]
                    hub.committed(run, rows, last, closed)
                    await asyncio.sleep(0)
                while not channel.complete:
                    advanced = channel.advanced
                    # A commit offered out of order (or never) is read from the log.
                    hub.announce(run, 7, True)
                    await advanced.wait()
            stored = [(e.seq, e.chunk) for e in await event_log.read_events(run)]
            assert channel.head == 7
            for cursor in range(3, 7):
                pending = channel.pending(cursor, Encoding.SSE)
                assert pending is not None and pending[1] == 7
                reader = SseReader()
                reader.feed(pending[0])
                assert reader.events == stored[cursor:]
            assert channel.pending(7, Encoding.SSE) is None
            if list(order) == sorted(set(order)) == [0, 1, 2]:
                assert channel.reads == 0  # every commit taken as offered
    finally:
        await hub.stop()


async def test_pending_when_followers_want_two_encodings_then_each_frames_the_log(
    event_log: EventLog,
) -> None:
    """One buffer, two framer keys (SSE and NDJSON followers of the same run): each
    batch keeps an encoding per key, and neither is served the other's bytes."""
    run = f"keys-{uuid.uuid4().hex[:10]}"
    await event_log.append(run, [{"type": "A"}])
    commits: list[tuple[list[Row] | None, int, bool]] = []
    remove = event_log.on_commit_rows(
        lambda run_id, rows, last, closed: (
            commits.append((rows, last, closed)) if run_id == run else None
        )
    )
    try:
        await event_log.append(run, [{"type": "B", "s": "caf\u00e9"}])
        await event_log.append(run, [{"type": "C"}, {"type": "D"}])
    finally:
        remove()
    stored = [(e.seq, e.chunk) for e in await event_log.read_events(run)][1:]
    hub = Hub(event_log, listen=False)
    try:
        with hub.subscribe(run) as sub:
            channel = sub.channel
            channel.anchor(RunState(1, False))
            for rows, last, closed in commits:
                hub.committed(run, rows, last, closed)
            for encoding in (Encoding.SSE, Encoding.NDJSON, Encoding.SSE, Encoding.NDJSON):
                pending = channel.pending(1, encoding)
                assert pending is not None and pending[1] == 4
                if encoding is Encoding.SSE:
                    reader = SseReader()
                    reader.feed(pending[0])
                    assert reader.events == stored
                else:
                    lines = [json.loads(line) for line in pending[0].decode().splitlines()]
                    assert [(int(x["id"]), x["chunk"]) for x in lines] == [
                        (seq, json.loads(chunk)) for seq, chunk in stored
                    ]
                # Past the first batch: the second alone, in this encoding too.
                rest = channel.pending(2, encoding)
                assert rest is not None and rest[0] == encoding.frame(commits[1][0] or [])
    finally:
        await hub.stop()


async def test_channel_when_its_last_follower_leaves_then_its_buffer_is_freed_without_a_collection(
    event_log: EventLog,
) -> None:
    """A retired channel's reader ends cancelled, and that task's traceback holds the
    channel: a cycle. Its buffered batches must not wait in it for the garbage
    collector (whose one walk of a few hundred ended runs' buffers paused the loop)."""
    run = f"retire-{uuid.uuid4().hex[:10]}"
    await event_log.append(run, [{"type": "A"}])
    hub = Hub(event_log, listen=False)
    gc.collect()
    gc.disable()
    try:
        with hub.subscribe(run) as sub:
            channel = sub.channel
            channel.anchor(RunState(1, False))
            for seq in range(2, 12):
                hub.committed(run, [(seq, json.dumps({"type": "B", "seq": seq}))], seq, False)
            assert channel.head == 11
            assert _batches_alive() == 10
            task = channel._task
        async with asyncio.timeout(DEADLINE):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        del channel, sub
        assert _batches_alive() == 0
    finally:
        gc.enable()
        await hub.stop()


def _batches_alive() -> int:
    return sum(isinstance(obj, Batch) for obj in gc.get_objects())
