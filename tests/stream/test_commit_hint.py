"""In-process commit hints: an append committed by this process wakes its followers.

The hub does not LISTEN and never re-checks, so the committer's `on_commit`
hook is the only thing that can wake the channel.
"""

from __future__ import annotations

import asyncio

from agent_replay.log import EventLog
from agent_replay.stream import NOW, Encoding, Hub, plan_stream, tail
from tests.stream.wire import SseReader

DEADLINE = 10.0


async def test_append_when_hub_hooked_to_committer_then_followers_woken_without_notify(
    database_url: str,
) -> None:
    event_log = await EventLog.open(database_url, pool_size=4)
    hub = Hub(event_log, listen=False)
    await hub.start()
    calls: list[tuple[str, int, bool]] = []
    remove_hub = event_log.on_commit(hub.announce)
    remove_spy = event_log.on_commit(lambda *hint: calls.append(hint))
    try:
        await event_log.append("hint-1", [{"type": "A"}])
        plan = await plan_stream(hub, "hint-1", NOW)
        readers = [SseReader() for _ in range(3)]
        subscribed = asyncio.Event()

        async def follow(reader: SseReader) -> None:
            async for blob in tail(hub, plan, Encoding.SSE):
                reader.feed(blob)
                subscribed.set()

        async with asyncio.timeout(DEADLINE):
            tasks = [asyncio.create_task(follow(r)) for r in readers]
            # Anchor the channel (its first read) before appending.
            while hub.stats().follower_reads < 3:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            for i in range(4):
                await event_log.append("hint-1", [{"type": "B", "n": i}, {"type": "C"}])
            await event_log.close_run("hint-1")
            await asyncio.gather(*tasks)
        stored = [(e.seq, e.chunk) for e in await event_log.read_events("hint-1")]
        assert len(stored) == 9
        for reader in readers:
            assert reader.events == stored[1:]
        assert calls[0] == ("hint-1", 1, False)
        assert calls[-1] == ("hint-1", 9, True)
        # One read per wake-up, shared: never one per follower.
        assert hub.stats().reads <= len(calls)
    finally:
        remove_spy()
        remove_hub()
        await hub.stop()
        await event_log.close()


async def test_on_commit_when_hook_raises_then_append_still_acknowledged(
    event_log: EventLog,
) -> None:
    def broken(run_id: str, last_seq: int, closed: bool) -> None:
        raise RuntimeError("a broken hint")

    remove = event_log.on_commit(broken)
    try:
        result = await event_log.append("hint-2", [{"type": "A"}])
    finally:
        remove()
    assert result.last_seq == 1


async def test_append_when_hub_takes_committed_rows_then_followers_served_without_reads(
    database_url: str,
) -> None:
    """The committer hands the hub its rows: after each follower's first read, the
    channel buffers every commit of this process without reading it back."""
    event_log = await EventLog.open(database_url, pool_size=4)
    hub = Hub(event_log, listen=False)
    await hub.start()
    remove = event_log.on_commit_rows(hub.committed)
    try:
        await event_log.append("rows-1", [{"type": "A"}])
        plan = await plan_stream(hub, "rows-1", NOW)
        readers = [SseReader() for _ in range(3)]

        async def follow(reader: SseReader) -> None:
            async for blob in tail(hub, plan, Encoding.SSE):
                reader.feed(blob)

        async with asyncio.timeout(DEADLINE):
            tasks = [asyncio.create_task(follow(r)) for r in readers]
            while hub.stats().follower_reads < 3:  # noqa: ASYNC110
                await asyncio.sleep(0.01)
            for i in range(4):
                await event_log.append(
                    "rows-1", [{"type": "B", "n": i, "s": "caf\u00e9\u2028"}, {"type": "C"}]
                )
            await asyncio.gather(*(event_log.append("rows-1", [{"type": "D"}]) for _ in range(5)))
            await event_log.close_run("rows-1")
            await asyncio.gather(*tasks)
        stored = [(e.seq, e.chunk) for e in await event_log.read_events("rows-1")]
        assert len(stored) == 14
        for reader in readers:
            assert reader.events == stored[1:]
        # Three first reads by the followers, none by the channel.
        assert hub.stats().follower_reads == 3
        assert hub.stats().reads == 0
    finally:
        remove()
        await hub.stop()
        await event_log.close()
