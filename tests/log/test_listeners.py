"""Who is notified: appends notify only when another process listens, or they close.

Every LISTEN connection registers in `log_listeners` under its process's key. The
append statement queues its NOTIFY only when a listener under another key is
registered, or when the group closes a run (every process's close hooks hear of
every close). Absence is shown by order: a connection delivers
notifications in commit order, so once a later commit's notification has
arrived, an earlier one that never came was never sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from agent_replay.log import EventLog
from agent_replay.log.listener import register
from agent_replay.log.notifications import CHANNEL, decode
from agent_replay.log.values import Notice
from tests.support.pg import Databases

DEADLINE = 10.0
# Listeners started one after another beside the appends (each a chance to race).
_STARTS = 60


@pytest.fixture
async def url(databases: Databases) -> AsyncIterator[str]:
    """A database of the test's own: no listener registered by another test."""
    made = await databases.clone()
    yield made
    await databases.drop(made)


class Heard:
    """A bare LISTEN connection (not registered: it changes no one's choice to notify)."""

    def __init__(self) -> None:
        self.notices: list[Notice] = []
        self._changed = asyncio.Event()

    def on_payload(self, _conn: object, _pid: int, _channel: str, payload: str) -> None:
        self.notices.extend(decode(payload))
        self._changed.set()

    async def until(self, notice: Notice) -> list[Notice]:
        async with asyncio.timeout(DEADLINE):
            while notice not in self.notices:
                self._changed.clear()
                await self._changed.wait()
        return self.notices


async def _listening(url: str) -> tuple[asyncpg.Connection, Heard]:
    conn = await asyncpg.connect(url)
    heard = Heard()
    await conn.add_listener(CHANNEL, heard.on_payload)
    return conn, heard


async def _registered(url: str) -> list[tuple[str, bool]]:
    """Each registered listener's process, and whether its backend is alive."""
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT process, EXISTS (SELECT FROM pg_stat_activity a WHERE a.pid = l.pid"
            " AND a.backend_start = l.backend_start) FROM log_listeners l ORDER BY process"
        )
        return [(row[0], row[1]) for row in rows]
    finally:
        await conn.close()


async def test_plain_appends_when_only_their_own_process_listens_then_nothing_is_notified(
    url: str,
) -> None:
    async with EventLog.connect(url) as log:
        listener = await log.listen(lambda _: None, lambda: None)
        conn, heard = await _listening(url)
        try:
            assert await _registered(url) == [(log.process, True)]
            await log.append("alone", [{"type": "A"}])  # a plain share
            await log.append("alone", [{"type": "TOOL_CALL_START", "toolCallName": "t"}])
            await log.append("alone", [{"type": "RUN_FINISHED", "usage": {"totalTokens": 1}}])
            await log.append("alone", [{"type": "B"}], close=True)  # a close: always
            assert await heard.until(Notice("alone", 4, True)) == [Notice("alone", 4, True)]
        finally:
            await conn.close()
            await listener.stop()


async def test_plain_appends_when_another_process_listens_then_each_commit_is_notified(
    url: str,
) -> None:
    async with EventLog.connect(url) as log, EventLog.connect(url) as other:
        received: list[Notice] = []
        listener = await other.listen(received.extend, lambda: None)
        conn, heard = await _listening(url)
        try:
            await log.append("other-hears", [{"type": "A"}])
            await log.append("other-hears", [{"type": "TOOL_CALL_START", "toolCallName": "t"}])
            await log.append("other-hears", [{"type": "B"}], close=True)
            assert await heard.until(Notice("other-hears", 3, True)) == [
                Notice("other-hears", 1, False),
                Notice("other-hears", 2, False),
                Notice("other-hears", 3, True),
            ]
        finally:
            await conn.close()
            await listener.stop()
        assert received == heard.notices


async def test_listener_when_stopped_then_unregistered_and_when_its_process_died_then_deleted(
    url: str,
) -> None:
    async with EventLog.connect(url) as log:
        listener = await log.listen(lambda _: None, lambda: None)
        assert await _registered(url) == [(log.process, True)]
        await listener.stop()
        assert await _registered(url) == []
        # A process that died listening: its row stays, its backend gone.
        crashed = await asyncpg.connect(url)
        await crashed.add_listener(CHANNEL, lambda *_: None)
        await register(crashed, "crashed")
        admin = await asyncpg.connect(url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", crashed.get_server_pid())
            async with asyncio.timeout(DEADLINE):
                while await _registered(url) != [("crashed", False)]:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
        finally:
            crashed.terminate()
            await admin.close()
        # The next registration, whosever, deletes it.
        listener = await log.listen(lambda _: None, lambda: None)
        assert await _registered(url) == [(log.process, True)]
        await listener.stop()


async def test_listener_when_its_connection_is_dropped_then_registered_again_on_reconnect(
    url: str,
) -> None:
    async with EventLog.connect(url) as log:
        connects = asyncio.Event()
        listener = await log.listen(lambda _: None, connects.set)
        connects.clear()
        pid = listener.listener_pid
        admin = await asyncpg.connect(url)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", pid)
            async with asyncio.timeout(DEADLINE):
                await connects.wait()
            assert listener.listener_pid != pid
            assert await _registered(url) == [(log.process, True)]
        finally:
            await admin.close()
            await listener.stop()


async def test_listener_when_registering_while_plain_appends_commit_then_it_hears_every_later_one(
    url: str,
) -> None:
    """A listener that starts while another process's plain appends commit one after
    another hears every commit its start's re-check could not have read: each seq above
    the run's last seq as read once it listens. A statement already past its check of
    the registry when the listener registered must have committed before the
    registration did, or it would go unheard until the slow re-check."""
    async with EventLog.connect(url) as producer, EventLog.connect(url) as follower:
        run = "racing"
        acked = 0
        moved = asyncio.Event()
        stop = asyncio.Event()

        async def produce() -> None:
            # One append at a time: each commit is one seq, so each seq is one notice.
            nonlocal acked
            while not stop.is_set():
                acked = (await producer.append(run, [{"type": "A"}])).last_seq
                moved.set()

        async def until(condition: Callable[[], bool], changed: asyncio.Event) -> None:
            async with asyncio.timeout(DEADLINE):
                while not condition():
                    changed.clear()
                    await changed.wait()

        async def start_once() -> tuple[int, list[int]] | None:
            """A listener started, then stopped once 3 commits past its re-check were
            heard: None, or the re-check's seq and what was heard, if any was missed."""
            received: list[Notice] = []
            arrived = asyncio.Event()

            def on_notices(notices: list[Notice]) -> None:
                received.extend(notices)
                arrived.set()

            listener = await follower.listen(on_notices, lambda: None)
            # The re-check a listener's start makes: everything up to here is read.
            base = (await follower.read_states([run]))[run].last_seq
            target = base + 3
            await until(lambda: acked >= target, moved)
            await until(lambda: any(n.last_seq >= target for n in received), arrived)
            await listener.stop()
            heard = {n.last_seq for n in received}
            if all(seq in heard for seq in range(base + 1, target + 1)):
                return None
            return base, sorted(heard)

        task = asyncio.create_task(produce())
        try:
            await until(lambda: acked >= 1, moved)  # the run exists: its state can be read
            missed = [miss for _ in range(_STARTS) if (miss := await start_once())]
        finally:
            stop.set()
            await task
        assert missed == []
