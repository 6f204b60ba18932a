"""The LISTEN connection: the log's notifications, decoded, for one process.

One connection outside the pool (a pooled one would be reset and handed to
others), reconnected with backoff when it drops. `on_connect` is called each
time it (re)starts listening: whatever was committed while nobody listened
woke nobody, so the caller re-checks. A connection that died without a FIN
looks alive until something is sent on it: `probe()` sends that something.

After its LISTEN, the connection registers in `log_listeners` under `process`
(`listener_lock` says why under a lock), and only then calls `on_connect`: the
plain append statements of every process but this one then notify it, and
every commit before that is the re-check's. It deletes its row when it stops;
a row it could not delete (the connection dropped) is deleted by the next
registration, whosever, once its backend is gone.

`own(pid)` names the backends of this process's own pool. Their commits reached
this process's hooks before (or as) their NOTIFY arrives (the committer and the
streams announce each commit in-process), so a notification from one of them
says nothing new; only the runs it closed are passed on (the close hooks hear
of every close, whoever made it). Dropping the rest saves every followed run a
wake-up per commit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from agent_replay.log.faults import UNREACHABLE
from agent_replay.log.notifications import (
    CHANNEL,
    READERS_CHANNEL,
    THREADS_CHANNEL,
    decode,
    decode_left,
    decode_threads,
)
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import Notice
from agent_replay.tasks import stopped, wait_set

log = logging.getLogger("replay.log")

_PROBE = QUERIES["probe"]
_LOCK_TIMEOUT = QUERIES["listener_lock_timeout"]
_LOCK = QUERIES["listener_lock"]
_REGISTER = QUERIES["listener_register"]
_UNREGISTER = QUERIES["listener_unregister"]
_FAILURES: tuple[type[BaseException], ...] = (*UNREACHABLE, asyncpg.PostgresError)


class Listener:
    """`await Listener(...).start()`; `stop()` at the end. See `LogStore.listen`."""

    def __init__(
        self,
        dsn: str,
        on_notices: Callable[[list[Notice]], None],
        on_connect: Callable[[], None],
        on_readers_left: Callable[[list[str]], None] | None = None,
        own: Callable[[int], bool] | None = None,
        process: str = "",
        on_threads: Callable[[list[str]], None] | None = None,
    ) -> None:
        self._dsn = dsn
        self._on_threads = on_threads
        self._own = own
        self._process = process
        self._on_notices = on_notices
        self._on_connect = on_connect
        self._on_readers_left = on_readers_left
        self._conn: asyncpg.Connection | None = None
        self._lost: asyncio.Event | None = None
        self._connected = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._on_stop: list[Callable[[], None]] = []
        self.connects = 0

    async def start(self, wait_seconds: float) -> Listener:
        """Start listening; returns once listening, or after `wait_seconds` (it keeps trying)."""
        self._task = asyncio.create_task(self._listen_forever(), name="log-listen")
        await wait_set(self._connected, wait_seconds)
        return self

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Call `callback` once this listener stops (what it registered elsewhere)."""
        self._on_stop.append(callback)

    async def stop(self) -> None:
        await stopped(self._task)
        self._task = None
        for callback in self._on_stop:
            callback()
        self._on_stop.clear()

    @property
    def listening(self) -> bool:
        return self._conn is not None

    @property
    def listener_pid(self) -> int | None:
        conn = self._conn
        return conn.get_server_pid() if conn is not None else None

    async def probe(self) -> None:
        conn, lost = self._conn, self._lost
        if conn is None or lost is None:
            return
        try:
            async with asyncio.timeout(5):
                await conn.fetchval(_PROBE)
        except _FAILURES:
            lost.set()

    def _notified(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        text = str(payload)
        if self._own is not None and self._own(pid):
            if " c" not in text:  # a cheap test first: closes are rare
                return
            closes = [notice for notice in decode(text) if notice.closed]
            if closes:
                self._on_notices(closes)
            return
        self._on_notices(decode(text))

    def _readers_notified(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        if self._on_readers_left is not None:
            self._on_readers_left(decode_left(str(payload)))

    def _threads_notified(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        # Not filtered by `own`: no hook of this process tells of a run's creation.
        if self._on_threads is not None:
            self._on_threads(decode_threads(str(payload)))

    async def _listen_forever(self) -> None:
        delay = 0.05
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=10)
            except _FAILURES as exc:
                log.warning("LISTEN connection failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            lost = asyncio.Event()
            conn.add_termination_listener(_setter(lost))
            try:
                await conn.add_listener(CHANNEL, self._notified)
                if self._on_readers_left is not None:
                    await conn.add_listener(READERS_CHANNEL, self._readers_notified)
                if self._on_threads is not None:
                    await conn.add_listener(THREADS_CHANNEL, self._threads_notified)
                await register(conn, self._process)
            except _FAILURES as exc:
                log.warning("LISTEN failed (%s); retrying in %.2fs", exc, delay)
                conn.terminate()
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            delay = 0.05
            self._conn, self._lost = conn, lost
            self.connects += 1
            self._connected.set()
            self._on_connect()
            try:
                await lost.wait()
                log.warning("LISTEN connection lost; reconnecting")
            finally:
                self._conn = self._lost = None
                if lost.is_set():
                    conn.terminate()
                else:  # stopped: not listening any more, so no longer notified
                    await _unregister(conn)


async def register(conn: asyncpg.Connection, process: str) -> None:
    """Register `conn`, which LISTENs, as the listener of `process` (`log_listeners`)."""
    async with conn.transaction():
        await conn.execute(_LOCK_TIMEOUT)
        await conn.execute(_LOCK)
        await conn.execute(_REGISTER, process)


async def _unregister(conn: asyncpg.Connection) -> None:
    """Delete this connection's row and close it; on any failure, drop it (its row
    is then a dead backend's, deleted by the next registration)."""
    try:
        async with asyncio.timeout(5):
            await conn.execute(_UNREGISTER)
        async with asyncio.timeout(5):
            await conn.close()
    except asyncio.CancelledError:
        conn.terminate()
        raise
    except Exception:  # the row is left for the next registration to delete
        conn.terminate()


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    def callback(_conn: Any) -> None:
        event.set()

    return callback
