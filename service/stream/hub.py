"""The per-process hub: one LISTEN connection, one reader per run, fan-out in memory.

    PostgreSQL ──NOTIFY "run last_seq [c]"──► Hub (one LISTEN connection, outside the pool)
                                               │ hint: wake that run's channel, if anyone follows it
                                               ▼
                                  Channel(run): one reader task, one read per wake-up,
                                  a bounded buffer of recent pages ──► every Tail of the run

A notification is only a hint; the table is the truth. A channel wakes its
reader when a hint says the log is ahead of what it has read, and the reader
reads `seq > head` with the run's state in one statement. What a hint can miss
(a LISTEN connection that dropped, a notification lost in between) is caught by
re-checking every followed run's `last_seq` when the connection comes back and
on a slow timer; while the connection is down the timer runs fast.

The buffer is bounded in events and bytes and shared by all of a run's
followers. A follower too slow to keep up finds its next event evicted and
reads the log itself, at its own pace (see `service.stream.tail`): nothing is
ever queued per follower.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import asyncpg

from service.errors import Unavailable
from service.stream.channel import Channel, Limits
from service.stream.reads import read_states

log = logging.getLogger("replay.stream")

CHANNEL = "replay_events"


class Subscription:
    """A follower's hold on its run's channel; `with hub.subscribe(run) as sub:`."""

    def __init__(self, hub: Hub, channel: Channel) -> None:
        self._hub = hub
        self.channel = channel
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            self._hub._release(self.channel)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class HubStats:
    channels: int
    subscribers: int
    listening: bool
    listener_pid: int | None
    connects: int
    # Reads by channels (one per wake-up, shared) and by followers on their own.
    reads: int
    follower_reads: int


class Hub:
    """One per process; `start()` in the app's lifespan, `stop()` at its end.

    `listen=False` leaves notifications to the caller (`announce`), which the
    property tests use to deliver, delay, drop and duplicate them at will.
    """

    def __init__(
        self,
        pool: asyncpg.Pool,
        dsn: str | None,
        *,
        limits: Limits | None = None,
        recheck_seconds: float = 5.0,
        poll_seconds: float = 0.5,
        listen: bool = True,
    ) -> None:
        self.pool = pool
        self.limits = limits or Limits()
        self._dsn = dsn
        self._listen = listen and dsn is not None
        self._recheck_seconds = recheck_seconds
        self._poll_seconds = poll_seconds
        self._channels: dict[str, Channel] = {}
        # Told of every run another process closes (e.g. the drivers, so a
        # cancel anywhere aborts the upstream here at once).
        self._close_hooks: list[Callable[[str], None]] = []
        self._conn: asyncpg.Connection | None = None
        self._lost: asyncio.Event | None = None
        self._connected = asyncio.Event()
        self._recheck_now = asyncio.Event()
        self._connects = 0
        self._retired_reads = 0
        # Reads followers made themselves (catch-up, or fallen behind the buffer).
        self.follower_reads = 0
        self._tasks: list[asyncio.Task[None]] = []

    # -- lifecycle ----------------------------------------------------------

    async def start(self, *, wait_seconds: float = 5.0) -> None:
        """Start listening; returns once listening (or after `wait_seconds`: the poll covers)."""
        if self._listen:
            self._tasks.append(asyncio.create_task(self._listen_forever(), name="stream-listen"))
            self._tasks.append(asyncio.create_task(self._recheck_forever(), name="stream-recheck"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._connected.wait(), wait_seconds)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for channel in list(self._channels.values()):
            await channel.close()
        self._channels.clear()

    # -- followers ----------------------------------------------------------

    def subscribe(self, run_id: str) -> Subscription:
        channel = self._channels.get(run_id)
        if channel is None:
            channel = self._channels[run_id] = Channel(run_id, self.pool, self.limits)
        channel.subscribers += 1
        return Subscription(self, channel)

    def _release(self, channel: Channel) -> None:
        channel.subscribers -= 1
        if channel.subscribers == 0 and self._channels.get(channel.run_id) is channel:
            del self._channels[channel.run_id]
            self._retired_reads += channel.reads
            # Cancelling the reader is synchronous enough: the task ends at its
            # next await, and its pool connection (if any) is released then.
            channel._task.cancel()

    # -- hints --------------------------------------------------------------

    def announce(self, run_id: str, last_seq: int, closed: bool = False) -> None:
        channel = self._channels.get(run_id)
        if channel is not None:
            channel.announce(last_seq, closed)

    def on_close(self, hook: Callable[[str], None]) -> None:
        """Call `hook(run_id)` whenever a notification says a run was closed."""
        self._close_hooks.append(hook)

    def _on_notify(self, conn: Any, pid: int, channel: str, payload: object) -> None:
        # A line per run: "<run_id> <last_seq>[ c]" (see service.log.sql).
        for line in str(payload).split("\n"):
            run_id, _, rest = line.partition(" ")
            seq, _, flag = rest.partition(" ")
            if run_id in self._channels and seq.isdigit():
                self.announce(run_id, int(seq), flag == "c")
            if flag == "c":
                for hook in self._close_hooks:
                    try:
                        hook(run_id)
                    except Exception:  # a hook's failure must not stop the listener
                        log.exception("stream: a close hook failed for run %s", run_id)

    async def recheck(self) -> None:
        """Re-read every followed run's state and wake the channels that are behind."""
        if not self._channels:
            return
        states = await read_states(self.pool, list(self._channels))
        for run_id, state in states.items():
            channel = self._channels.get(run_id)
            if channel is not None:
                channel.anchor(state)

    # -- the LISTEN connection ----------------------------------------------

    async def _listen_forever(self) -> None:
        assert self._dsn is not None
        delay = 0.05
        while True:
            try:
                conn = await asyncpg.connect(self._dsn, timeout=10)
            except (OSError, TimeoutError, asyncpg.PostgresError) as exc:
                log.warning("stream: LISTEN connection failed (%s); retrying in %.2fs", exc, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            lost = asyncio.Event()
            conn.add_termination_listener(_setter(lost))
            try:
                await conn.add_listener(CHANNEL, self._on_notify)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
                log.warning("stream: LISTEN failed (%s)", exc)
                conn.terminate()
                continue
            delay = 0.05
            self._conn, self._lost = conn, lost
            self._connects += 1
            self._connected.set()
            # Whatever was committed while no connection listened woke nobody.
            self._recheck_now.set()
            try:
                await lost.wait()
                log.warning("stream: LISTEN connection lost; reconnecting")
            finally:
                self._conn = self._lost = None
                conn.terminate()

    async def _recheck_forever(self) -> None:
        while True:
            interval = self._recheck_seconds if self._conn is not None else self._poll_seconds
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._recheck_now.wait(), interval)
            self._recheck_now.clear()
            try:
                await self.recheck()
            except Unavailable as exc:
                log.warning("stream: re-check failed: %s", exc)
            await self._probe_listener()

    async def _probe_listener(self) -> None:
        """A connection that died silently (no FIN) must not pass for a listening one."""
        conn, lost = self._conn, self._lost
        if conn is None or lost is None:
            return
        try:
            await asyncio.wait_for(conn.fetchval("SELECT 1"), 5)
        except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
            lost.set()

    # -- introspection --------------------------------------------------------

    @property
    def listening(self) -> bool:
        return self._conn is not None

    def stats(self) -> HubStats:
        conn = self._conn
        return HubStats(
            channels=len(self._channels),
            subscribers=sum(c.subscribers for c in self._channels.values()),
            listening=conn is not None,
            listener_pid=conn.get_server_pid() if conn is not None else None,
            connects=self._connects,
            reads=self._retired_reads + sum(c.reads for c in self._channels.values()),
            follower_reads=self.follower_reads,
        )


def _setter(event: asyncio.Event) -> Callable[[Any], None]:
    def callback(_conn: Any) -> None:
        event.set()

    return callback
