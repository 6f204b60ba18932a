"""The per-process hub: one LISTEN connection, one reader per run, fan-out in memory.

    the log ──notices (run, last_seq, closed)──► Hub (the store's one LISTEN connection)
    this process's commits ──committed rows──►   │ hint: wake that run's channel if followed
                                               │ rows: buffered (no read) if they continue it
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
reads the log itself, at its own pace (see `agent_replay.stream.tail`): nothing is
ever queued per follower.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol

from agent_replay.errors import Draining, Unavailable
from agent_replay.log.chunks import storable
from agent_replay.log.notifications import thread_key
from agent_replay.log.store import Erasure, Listening, ReaderPresence, Reads, RunStates
from agent_replay.log.values import Notice, Row
from agent_replay.stream.channel import Channel, Limits
from agent_replay.stream.presence import Presence
from agent_replay.tasks import stopped, wait_set

log = logging.getLogger("replay.stream")


class Subscription:
    """A follower's hold on its run's channel; `with hub.subscribe(run) as sub:`."""

    def __init__(self, hub: Hub, channel: Channel, linger: float) -> None:
        self._hub = hub
        self.channel = channel
        self._linger = linger
        self._open = True

    def close(self) -> None:
        if self._open:
            self._open = False
            self._hub._release(self.channel, self._linger)

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
    # Open thread streams (each also a subscriber of the run it is tailing, if any).
    thread_followers: int = 0


class ThreadWatch:
    """A thread follower's hold on the thread's notices; `with hub.watch_thread(id) as w:`.

    `woken` is set whenever a run may have been made on the thread: a notice of
    one (from any process), a reconnect of the LISTEN connection, the slow
    re-check, or a drain. Clear it before reading the thread's runs, so a notice
    that arrives during the read wakes the next wait. `on_wake` is called each time
    too (a follower that waits on more than the thread: its runs' pages).
    """

    def __init__(self, hub: Hub, key: str, on_wake: Callable[[], None] | None = None) -> None:
        self._hub = hub
        self.key = key
        self.woken = asyncio.Event()
        self._on_wake = on_wake

    def wake(self) -> None:
        self.woken.set()
        if self._on_wake is not None:
            self._on_wake()

    def close(self) -> None:
        watches = self._hub._threads.get(self.key)
        if watches is not None:
            watches.discard(self)
            if not watches:
                del self._hub._threads[self.key]

    def __enter__(self) -> ThreadWatch:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class FollowedLog(Reads, RunStates, ReaderPresence, Erasure, Protocol):
    """What following runs asks of the log: their events and commits, their states, the
    presence of their readers, and whether a thread was erased."""


class Hub:
    """One per process; `start()` in the app's lifespan, `stop()` at its end.

    `listen=False` leaves notifications to the caller (`announce`), which the
    property tests use to deliver, delay, drop and duplicate them at will.
    """

    def __init__(
        self,
        store: FollowedLog,
        *,
        limits: Limits | None = None,
        recheck_seconds: float = 5.0,
        poll_seconds: float = 0.5,
        listen: bool = True,
        presence: Presence | None = None,
    ) -> None:
        self.store = store
        # Told of every follower that joins or leaves (disconnect policies).
        self.presence = presence
        self.limits = limits or Limits()
        self._listen = listen
        self._recheck_seconds = recheck_seconds
        self._poll_seconds = poll_seconds
        self._channels: dict[str, Channel] = {}
        # Thread followers by thread key (`agent_replay.log.notifications.thread_key`).
        self._threads: dict[str, set[ThreadWatch]] = {}
        # Told of every run another process closes (e.g. the drivers, so a
        # cancel anywhere aborts the upstream here at once).
        self._close_hooks: list[Callable[[str], None]] = []
        # Told of every run whose last reader just left, on any process (the
        # drivers, so a disconnect policy is judged at once, not at a poll).
        self._unread_hooks: list[Callable[[str], None]] = []
        self._listener: Listening | None = None
        self._recheck_now = asyncio.Event()
        self._retired_reads = 0
        # Reads followers made themselves (catch-up, or fallen behind the buffer).
        self.follower_reads = 0
        self._tasks: list[asyncio.Task[None]] = []
        # Set by `drain()`: no new stream is served here (503 draining); the live reads
        # waiting on a channel (Durable Streams' long-polls and SSE) end early.
        self.draining = False

    # -- lifecycle ----------------------------------------------------------

    async def start(self, *, wait_seconds: float = 5.0) -> None:
        """Start listening; returns once listening (or after `wait_seconds`: the poll covers)."""
        if self._listen:
            self._listener = await self.store.listen(
                self._on_notices,
                self._recheck_now.set,
                wait_seconds=wait_seconds,
                on_readers_left=self._on_readers_left,
                on_threads=self._on_threads,
            )
            self._tasks.append(asyncio.create_task(self._recheck_forever(), name="stream-recheck"))
        if self.presence is not None:
            await self.presence.start()

    async def stop(self) -> None:
        if self.presence is not None:
            await self.presence.stop()
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None
        await stopped(*self._tasks)
        self._tasks.clear()
        for channel in list(self._channels.values()):
            await channel.close()
        self._channels.clear()

    def drain(self) -> None:
        """The process is about to stop: refuse new streams, wake the live reads so they end."""
        self.draining = True
        for channel in list(self._channels.values()):
            channel.nudge()
        self._wake_threads()

    def refuse_if_draining(self) -> None:
        """A new stream is refused while draining, before any byte: its client (or the proxy)
        opens it on another replica."""
        if self.draining:
            raise Draining("this replica is draining before it stops: follow from another")

    # -- followers ----------------------------------------------------------

    def subscribe(self, run_id: str, *, linger: float = 0.0, life: object = None) -> Subscription:
        """Follow `run_id`.

        `linger`: keep the channel (following, buffering) that long after this
        subscriber leaves last, for a follower that comes straight back (a
        long-poll's next request finds what was committed in between buffered).
        `life`: which life of the run the subscriber knows (a name deleted and
        made again keeps its run id). An idle channel is taken over only by a
        subscriber of the life it was made for; anyone else gets a new one, so
        no buffer of an earlier life (or of an unknown one) is ever served.
        """
        channel = self._channels.get(run_id)
        if (
            channel is not None
            and channel.subscribers == 0
            and (life is None or channel.life != life)
        ):
            self._retire(channel)
            channel = None
        if channel is None:
            channel = self._channels[run_id] = Channel(run_id, self.store, self.limits)
            channel.life = life
        channel.subscribers += 1
        channel.idle_epoch += 1
        if self.presence is not None:
            self.presence.joined(run_id)
        return Subscription(self, channel, linger)

    def _release(self, channel: Channel, linger: float) -> None:
        channel.subscribers -= 1
        if self.presence is not None:
            self.presence.left(channel.run_id)
        if channel.subscribers == 0 and self._channels.get(channel.run_id) is channel:
            if linger <= 0:
                self._retire(channel)
                return
            epoch = channel.idle_epoch
            asyncio.get_running_loop().call_later(linger, self._retire_idle, channel, epoch)

    def _retire_idle(self, channel: Channel, epoch: int) -> None:
        # Only if nobody subscribed since this timer was set (each subscribe moves the epoch).
        if channel.subscribers == 0 and channel.idle_epoch == epoch:
            self._retire(channel)

    def _retire(self, channel: Channel) -> None:
        if self._channels.get(channel.run_id) is channel:
            del self._channels[channel.run_id]
            self._retired_reads += channel.reads
            # Cancelling the reader is synchronous enough: the task ends at its
            # next await, and its pool connection (if any) is released then.
            channel.retire()

    def watch_thread(
        self, thread_id: str, on_wake: Callable[[], None] | None = None
    ) -> ThreadWatch:
        """Be woken whenever a run may have been made on `thread_id` (see `ThreadWatch`)."""
        watch = ThreadWatch(self, thread_key(storable(thread_id)), on_wake)
        self._threads.setdefault(watch.key, set()).add(watch)
        return watch

    def _on_threads(self, keys: list[str]) -> None:
        for key in keys:
            for watch in self._threads.get(key, ()):
                watch.wake()

    def _wake_threads(self) -> None:
        for watches in self._threads.values():
            for watch in watches:
                watch.wake()

    # -- hints --------------------------------------------------------------

    def announce(self, run_id: str, last_seq: int, closed: bool = False) -> None:
        channel = self._channels.get(run_id)
        if channel is not None:
            channel.announce(last_seq, closed)

    def follows(self, run_id: str) -> bool:
        """Whether a channel here follows the run (what `committed` wants rows of)."""
        return run_id in self._channels

    def committed(
        self, run_id: str, rows: list[Row] | None, last_seq: int, closed: bool = False
    ) -> None:
        """This process committed `rows` to the run (the store's `on_commit_rows`):
        its channel buffers them without reading them back, when they continue it."""
        channel = self._channels.get(run_id)
        if channel is not None:
            channel.offer(rows, last_seq, closed)

    def on_close(self, hook: Callable[[str], None]) -> None:
        """Call `hook(run_id)` whenever a notification says a run was closed."""
        self._close_hooks.append(hook)

    def _on_notices(self, notices: list[Notice]) -> None:
        for run_id, last_seq, closed in notices:
            if run_id in self._channels:
                self.announce(run_id, last_seq, closed)
            if closed:
                for hook in self._close_hooks:
                    try:
                        hook(run_id)
                    except Exception:  # a hook's failure must not stop the listener
                        log.exception("stream: a close hook failed for run %s", run_id)

    def on_readers_left(self, hook: Callable[[str], None]) -> None:
        """Call `hook(run_id)` whenever a notification says nobody reads a run any more."""
        self._unread_hooks.append(hook)

    def _on_readers_left(self, run_ids: list[str]) -> None:
        for run_id in run_ids:
            for hook in self._unread_hooks:
                try:
                    hook(run_id)
                except Exception:  # a hook's failure must not stop the listener
                    log.exception("stream: a readers-left hook failed for run %s", run_id)

    async def recheck(self) -> None:
        """Re-read every followed run's state and wake the channels that are behind;
        wake every thread follower to read its thread again (a notice may be lost)."""
        self._wake_threads()
        if not self._channels:
            return
        states = await self.store.read_states(list(self._channels))
        for run_id, state in states.items():
            channel = self._channels.get(run_id)
            if channel is not None:
                channel.anchor(state)

    # -- the slow re-check -------------------------------------------------

    async def _recheck_forever(self) -> None:
        while True:
            interval = self._recheck_seconds if self.listening else self._poll_seconds
            await wait_set(self._recheck_now, interval)
            self._recheck_now.clear()
            try:
                await self.recheck()
            except Unavailable as exc:
                log.warning("stream: re-check failed: %s", exc)
            if self._listener is not None:
                # A connection that died silently (no FIN) must not pass for a listening one.
                await self._listener.probe()

    # -- introspection --------------------------------------------------------

    @property
    def listening(self) -> bool:
        return self._listener is not None and self._listener.listening

    def stats(self) -> HubStats:
        listener = self._listener
        return HubStats(
            channels=len(self._channels),
            subscribers=sum(c.subscribers for c in self._channels.values()),
            listening=self.listening,
            listener_pid=listener.listener_pid if listener is not None else None,
            connects=listener.connects if listener is not None else 0,
            reads=self._retired_reads + sum(c.reads for c in self._channels.values()),
            follower_reads=self.follower_reads,
            thread_followers=sum(len(watches) for watches in self._threads.values()),
        )
