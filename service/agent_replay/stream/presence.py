"""`Presence`: this process's share of "who reads a run", kept in the log.

A hosted run whose disconnect policy watches its readers (`cancel`,
`cancel_after`) is cancelled by its driver, on whichever process, once the log
says nobody has read it for long enough; so every process tells the log which
runs it has followers of. The hub reports each follower that joins or leaves
(any encoding: SSE, NDJSON, Durable Streams, AI SDK, AG-UI all follow through
it); this worker brings the log's rows in line with that, level-triggered: at
once when a run gets its first follower here or loses its last, and on a
heartbeat for the rest, so a process that dies leaves rows that go stale.

A run whose last follower left is still held for `linger_seconds`: a Durable
Streams long-poll, or a client reconnecting at once, is one reader, not a
reader that left and came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid

from agent_replay.errors import ReplayError
from agent_replay.log.store import ReaderPresence
from agent_replay.tasks import stopped, wait_set

log = logging.getLogger("replay.stream")


class Presence:
    def __init__(
        self,
        store: ReaderPresence,
        *,
        fresh_seconds: float,
        linger_seconds: float = 1.0,
        holder: str | None = None,
    ) -> None:
        self.store = store
        self.fresh_seconds = fresh_seconds
        # Three heartbeats to a row's freshness: one missed is not a reader gone.
        self.interval = max(0.2, fresh_seconds / 3)
        self.linger_seconds = linger_seconds
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}/{uuid.uuid4().hex[:12]}"
        self._followers: dict[str, int] = {}
        self._released: dict[str, float] = {}  # run -> when its last follower here left
        self._held: set[str] = set()  # runs the log has (or was told of) a row for
        self._beat_at = 0.0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    # -- told by the hub (synchronous, never blocks) ---------------------------

    def joined(self, run_id: str) -> None:
        self._followers[run_id] = self._followers.get(run_id, 0) + 1
        self._released.pop(run_id, None)
        if run_id not in self._held:
            self._wake.set()

    def left(self, run_id: str) -> None:
        count = self._followers.get(run_id, 0) - 1
        if count > 0:
            self._followers[run_id] = count
            return
        self._followers.pop(run_id, None)
        self._released[run_id] = time.monotonic()
        self._wake.set()

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="reader-presence")

    async def stop(self) -> None:
        await stopped(self._task)
        self._task = None
        # Whoever still read here is cut off with this process: say so now
        # rather than leaving the rows to go stale.
        if self._held:
            with contextlib.suppress(ReplayError):
                await self.store.readers_left(self.holder, sorted(self._held), self.fresh_seconds)
            self._held.clear()

    # -- the worker -------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                await self.sync()
            except ReplayError as exc:  # the database is away: the next tick retries
                log.warning("presence: cannot update readers: %s", exc)
            now = time.monotonic()
            wait = self._beat_at + self.interval - now
            if self._released:
                wait = min(wait, min(self._released.values()) + self.linger_seconds - now)
            await wait_set(self._wake, max(0.01, wait))
            self._wake.clear()

    async def sync(self) -> None:
        """Bring the log's rows for this process in line with its followers."""
        now = time.monotonic()
        for run_id, at in list(self._released.items()):
            if now - at >= self.linger_seconds:
                del self._released[run_id]
        present = set(self._followers) | set(self._released)
        gone = self._held - present
        if gone:
            await self.store.readers_left(self.holder, sorted(gone), self.fresh_seconds)
            self._held -= gone
        new = present - self._held
        if now - self._beat_at >= self.interval:
            if present:
                await self.store.readers_heartbeat(self.holder, sorted(present))
            self._beat_at = now
        elif new:
            await self.store.readers_heartbeat(self.holder, sorted(new))
        self._held |= present
