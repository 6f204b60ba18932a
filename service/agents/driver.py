"""`Driver`: one hosted run, from its upstream into the log, until it ends.

It reads the upstream in one task and appends in another, so events that
arrive while an append commits go into the next append together; a third
task renews the run's lease. However it stops, the run is closed with a
terminal event: the upstream's own, or the RUN_ERROR its `EndReason` maps to
(`service.agents.endings`). Nothing here knows about other runs: the
registry (`Drivers`) starts drivers and the `Reaper` closes runs whose
driver died.

Cancel works across processes without a side channel: it appends RUN_ERROR
and closes the run; the driving process hears the close (a notification, its
next append's `run_closed`, or its lease renewal failing) and stops reading.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

import aiohttp

from service.agents import upstream
from service.agents.catalog import Agent, RunInput
from service.agents.endings import EndReason, close_run
from service.errors import ReplayError, RunClosed
from service.ingest import Limits
from service.log import LogStore, StoredChunk
from service.log.chunks import TERMINAL_TYPES

log = logging.getLogger("replay.agents")

# Upstream reads (each a list of events) waiting for the appender.
_QUEUE_READS = 256


@dataclass(frozen=True, slots=True)
class _End:
    """The reader's last word: why the upstream stream stopped."""

    reason: EndReason  # FINISHED: the upstream ended by itself
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Lease:
    """Who holds a driven run's lease, and for how long at a time."""

    owner: str
    seconds: float

    @property
    def interval(self) -> float:
        """How often to renew (or reap): a third of the lease, so one miss has slack."""
        return max(0.2, self.seconds / 3)


class Driver:
    """Drives one run; `start()` once, `halt(reason)` to stop it, `done` when it has."""

    def __init__(
        self,
        log: LogStore,
        run_id: str,
        thread_id: str,
        agent: Agent,
        run_input: RunInput,
        *,
        lease: Lease,
        idle_seconds: float,
        limits: Limits,
        client: Callable[[], aiohttp.ClientSession],
    ) -> None:
        self.log = log
        self.run_id = run_id
        self.thread_id = thread_id
        self._agent = agent
        self._input = run_input
        self._lease = lease
        self._idle_seconds = idle_seconds
        self._limits = limits
        self._client = client
        self._stop: EndReason | None = None  # why we asked the reader to stop
        self._reader: asyncio.Task[None] | None = None
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()

    def start(self, on_done: Callable[[Driver], None]) -> None:
        self._task = asyncio.create_task(self._drive(on_done), name=f"drive-{self.run_id}")

    def halt(self, reason: EndReason) -> None:
        """Stop reading the upstream; the run closes as the first reason given says."""
        self._stop = self._stop or reason
        if self._reader is not None:
            self._reader.cancel()

    async def wait(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.done.wait(), seconds)

    async def _drive(self, on_done: Callable[[Driver], None]) -> None:
        # Bounded: an upstream faster than the log waits (TCP backpressure)
        # instead of growing this process's memory.
        queue: asyncio.Queue[list[StoredChunk] | _End] = asyncio.Queue(maxsize=_QUEUE_READS)
        self._reader = asyncio.create_task(self._read(queue))
        if self._stop is not None:  # halted before it started
            self._reader.cancel()
        renewer = asyncio.create_task(self._renew())
        last_type: str | None = None
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                # The reader's _End is always its last item.
                end = items[-1] if isinstance(items[-1], _End) else None
                chunks = [c for item in items if not isinstance(item, _End) for c in item]
                if chunks:
                    await self.log.append(self.run_id, chunks, create=False)
                    last_type = chunks[-1].type
                if end is not None:
                    reason = end.reason
                    if reason is EndReason.FINISHED and last_type not in TERMINAL_TYPES:
                        reason = EndReason.INCOMPLETE
                    await close_run(self.log, self.run_id, self.thread_id, reason, end.detail)
                    return
        except RunClosed:
            # Closed elsewhere (a cancel on another process): stop reading.
            log.info("run %s was closed while driven; stopping", self.run_id)
        except ReplayError as exc:
            # The log is unavailable: leave the lease to expire; a reaper closes the run.
            log.error("run %s: cannot append (%s); leaving it to the reaper", self.run_id, exc)
        finally:
            self._reader.cancel()
            renewer.cancel()
            on_done(self)
            self.done.set()

    async def _read(self, queue: asyncio.Queue[list[StoredChunk] | _End]) -> None:
        try:
            async for batch in upstream.events(
                self._agent, self._input, self._client(), self._idle_seconds, self._limits
            ):
                await queue.put(batch)
            end = _End(EndReason.FINISHED)
        except asyncio.CancelledError:
            # Leaving the upstream request aborts it; say why we stopped.
            end = _End(self._stop or EndReason.CANCELLED)
        except upstream.UpstreamError as exc:
            end = _End(EndReason.UPSTREAM_ERROR, str(exc))
        except Exception as exc:  # an in-process agent's own bug ends its run, not us
            log.exception("agent of run %s failed", self.run_id)
            end = _End(EndReason.UPSTREAM_ERROR, f"the agent failed: {exc!r}")
        # The appender drains the queue, so this waits at most one append.
        await queue.put(end)

    async def _renew(self) -> None:
        lease = self._lease
        while True:
            await asyncio.sleep(lease.interval)
            try:
                kept = await self.log.renew_lease(self.run_id, lease.owner, lease.seconds)
            except Exception:  # a blip: try again next tick, the lease has slack
                log.warning("run %s: lease renewal failed", self.run_id, exc_info=True)
                continue
            if not kept:
                self.halt(EndReason.LOST)
                return
