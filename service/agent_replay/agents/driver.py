"""`Driver`: one hosted run, from its upstream into the log, until it ends.

The upstream's reads go to the append pipeline: at most one append in
flight, and what arrives while it commits goes into the next one together.
The pipeline runs on the appends' own futures (callbacks, not a task of its
own), and an HTTP upstream's reads arrive in its protocol's callback
(`agent_replay.agents.wire`), so a streamed token wakes no task of the driver's; an
in-process agent's generator is iterated by the reader task. However it
stops, the run is closed with a terminal event: the upstream's own, or the
RUN_ERROR its `EndReason` maps to (`agent_replay.agents.endings`). Nothing here
knows about other runs: the registry (`Drivers`) starts drivers and renews all
their leases at once, and the `Reaper` closes runs whose driver died.

Cancel works across processes without a side channel: it appends RUN_ERROR
and closes the run; the driving process hears the close (a notification, its
next append's `run_closed`, or its lease renewal failing) and stops reading.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from agent_replay import metrics
from agent_replay.agents import upstream
from agent_replay.agents.budget import NONE, Budget, Meter, exhausted
from agent_replay.agents.catalog import Agent, HttpAgent, RunInput
from agent_replay.agents.endings import EndReason, close_run
from agent_replay.agents.policy import DEFAULT, FIRST_READER_SECONDS, OnDisconnect
from agent_replay.agents.wire import HttpUpstream
from agent_replay.errors import Erased, ReplayError, RunClosed, SeqConflict, Unavailable
from agent_replay.event_types import TERMINAL
from agent_replay.ingest import Limits, Redactor, record
from agent_replay.log import AppendResult, Appends, ReaderPresence, Redaction, StoredChunk
from agent_replay.tasks import wait_set

log = logging.getLogger("replay.agents")

# Upstream reads (each a list of events) waiting for the append in flight; past
# this the reader waits too (TCP backpressure on the upstream).
_PENDING_READS = 256
# Appends and closes the database refused for now: retried with backoff in this range.
_RETRY_FIRST_SECONDS = 0.05
_RETRY_MAX_SECONDS = 1.0
# A reader count that failed is tried again this soon.
_RECOUNT_SECONDS = 0.25


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


class DriverLog(Appends, ReaderPresence, Protocol):
    """What a driver asks of the log: its run's appends, and whether anyone reads it."""


class Driver:
    """Drives one run; `start()` once, `halt(reason)` to stop it, `done` when it has."""

    def __init__(
        self,
        log: DriverLog,
        run_id: str,
        thread_id: str,
        agent: Agent,
        run_input: RunInput,
        *,
        lease: Lease,
        idle_seconds: float,
        limits: Limits,
        next_seq: int,
        on_disconnect: OnDisconnect = DEFAULT,
        first_reader_seconds: float = FIRST_READER_SECONDS,
        budget: Budget = NONE,
        created_at: datetime | None = None,
        redactor: Redactor | None = None,
        forwarded: Mapping[str, str] | None = None,
    ) -> None:
        self.log = log
        # The starting request's headers for an HTTP upstream (`agents.forwarding`): in
        # this object only, never stored; a run driven elsewhere is reaped, not redriven.
        self._forwarded = forwarded
        # Counts the upstream's events against the run's budget (None: it has none);
        # its time runs from the log's creation time, not from this driver's start.
        self._meter = Meter(budget) if budget else None
        self._deadline = budget.deadline(created_at) if created_at is not None else None
        self._out_of_time: asyncio.TimerHandle | None = None
        self._stop_detail = ""  # the budget a BUDGET_EXHAUSTED stop names
        # The run's redaction, fed every read in order. What it holds back (the possible
        # start of a secret, at most the rules' window per open message) lives here only:
        # the upstream was promised nothing for it, and if this process dies the upstream
        # connection dies with it and a reaper closes the run, exactly as for the reads
        # waiting in `_pending`.
        self._redactor = redactor
        # Matches in the chunks waiting (`_pending`) and in flight: each append carries
        # its own to the run's counts, and /metrics counts them once it committed.
        self._pending_counts: Counter[str] = Counter()
        self._inflight_counts: Counter[str] = Counter()
        self.on_disconnect = on_disconnect
        self._first_reader_seconds = first_reader_seconds
        # Set when a notification says the run's last reader left (any process).
        self._readers_left = asyncio.Event()
        self.run_id = run_id
        self.thread_id = thread_id
        self._agent = agent
        self._input = run_input
        self._lease = lease
        self._idle_seconds = idle_seconds
        self._limits = limits
        self._upstream: HttpUpstream | None = None
        # The seq the next append must start at: every append carries it, so one
        # retried after a lost answer is stored once.
        self._next_seq = next_seq
        self._stop: EndReason | None = None  # why we asked the reader to stop
        self._reader: asyncio.Task[_End] | None = None
        self._reading = False  # the reader task has started
        self._task: asyncio.Task[None] | None = None
        self.done = asyncio.Event()
        # The append pipeline (`_feed`): the chunks of the append in flight (or
        # waiting to be retried), the chunks read since, and how many reads they are.
        self._inflight: list[StoredChunk] | None = None
        self._pending: list[StoredChunk] = []
        self._pending_reads = 0
        self._retry_delay = _RETRY_FIRST_SECONDS
        self._retry: asyncio.TimerHandle | None = None
        self._last_type: str | None = None  # of the last chunk appended
        # Why the pipeline stopped for good (it then cancels the reader).
        self._failure: BaseException | None = None
        # Resolved when the pipeline empties or fails (`_settled`), and when there
        # is room for more reads (`_feed`).
        self._drained: asyncio.Future[None] | None = None
        self._room: asyncio.Future[None] | None = None

    def start(self, on_done: Callable[[Driver], None]) -> None:
        self._task = asyncio.create_task(self._drive(on_done), name=f"drive-{self.run_id}")

    def halt(self, reason: EndReason, detail: str = "") -> None:
        """Stop reading the upstream; the run closes as the first reason given says."""
        if self._stop is None:
            self._stop, self._stop_detail = reason, detail
        # Only a reader under way is cancelled: one not started yet sees `_stop` as it
        # starts (cancelled before its first step, a task ends without running a line
        # of it), and one halting itself (an in-process agent's event past the budget)
        # stops at its loop (cancelled from within and returning before its next
        # await, it would end cancelled instead of with its reason).
        if self._reading and self._reader is not asyncio.current_task():
            assert self._reader is not None
            self._reader.cancel()

    def _exhaust(self, message: str, name: str) -> None:
        """Ceiling `name` of the run's budget was passed: admit nothing more, abort the
        upstream. The first ceiling passed is the one the run's RUN_ERROR names."""
        meter = self._meter
        assert meter is not None
        if self._out_of_time is not None:
            self._out_of_time.cancel()
            self._out_of_time = None
        if meter.exhausted is None or meter.exhausted_by is None:
            meter.exhausted, meter.exhausted_by = message, name
        self.halt(EndReason.BUDGET_EXHAUSTED, meter.exhausted)

    def _watch_time(self) -> None:
        """End the run once its budget's time is out, by the wall clock against the log's
        creation time: a run's time is the same on every process, whenever its driver
        started. The loop's timers run on another clock, which may drift from the wall
        clock: a timer that fires early looks again."""
        self._out_of_time = None
        if self._meter is None or self._deadline is None:
            return
        left = self._deadline - time.time()
        if left <= 0:
            self._exhaust(exhausted("max_seconds", self._meter.budget.max_seconds), "max_seconds")
        else:
            self._out_of_time = asyncio.get_running_loop().call_later(left, self._watch_time)

    def readers_left(self) -> None:
        """Nobody reads the run any more: judge its disconnect policy now, not at the poll."""
        self._readers_left.set()

    async def wait(self, seconds: float) -> None:
        await wait_set(self.done, seconds)

    async def _drive(self, on_done: Callable[[Driver], None]) -> None:
        self._reader = asyncio.create_task(self._read(), name=f"read-{self.run_id}")
        self._watch_time()
        watcher = asyncio.create_task(self._watch()) if self.on_disconnect.watched else None
        try:
            end = await self._reader
            if self._redactor is not None:
                # What is still held (a message the upstream left open) goes before the
                # close, redacted as complete text.
                held = self._redactor.finish()
                self._pending_counts.update(self._redactor.take_counts())
                if held:
                    self._deliver(held)
            await self._settled()
            reason = end.reason
            if reason is EndReason.FINISHED and self._last_type not in TERMINAL:
                reason = EndReason.INCOMPLETE
            elif reason is EndReason.BUDGET_EXHAUSTED and self._last_type in TERMINAL:
                reason = EndReason.FINISHED  # it ended by itself before the budget ran out
            await self._close(reason, end.detail)
            if reason is EndReason.BUDGET_EXHAUSTED and self._meter is not None:
                metrics.BUDGETS_EXHAUSTED.labels(self._meter.exhausted_by or "").inc()
        except (RunClosed, SeqConflict, Erased):
            # Closed elsewhere (a cancel on another process, a reaper that took the
            # lease after an outage longer than it), written by another, or its thread
            # erased (nothing to close, nothing for a reaper): stop.
            log.info("run %s was closed or taken over while driven; stopping", self.run_id)
        except ReplayError as exc:
            # Refused for good (not an outage: those are retried): the lease expires and
            # a reaper closes the run.
            log.error("run %s: cannot append (%s); leaving it to the reaper", self.run_id, exc)
        finally:
            self._reader.cancel()
            if self._retry is not None:
                self._retry.cancel()
            if self._out_of_time is not None:
                self._out_of_time.cancel()
            if watcher is not None:
                watcher.cancel()
            on_done(self)
            self.done.set()

    # -- the append pipeline --------------------------------------------------

    async def _feed(self, chunks: list[StoredChunk]) -> None:
        """Append `chunks` now if nothing is in flight, else with the next append.

        Every append carries the run's next seq, so one retried after a lost answer
        is stored once. While the log is away the retries go on (same chunks, same
        expected_seq) and reads gather; past `_PENDING_READS` the reader waits
        (backpressure on the upstream instead of this process's memory).
        """
        if not self._deliver(chunks):
            self._room = asyncio.get_running_loop().create_future()
            await self._room

    def _deliver(self, chunks: list[StoredChunk]) -> bool:
        """`_feed` without the wait: whether there is room for more reads."""
        redactor = self._redactor
        if redactor is not None:
            chunks = list(redactor.chunks(chunks))
            if redactor.counts:
                self._pending_counts.update(redactor.take_counts())
            if not chunks:  # all held back: nothing to append yet
                return self._pending_reads < _PENDING_READS
        if self._meter is not None:
            # Nothing past the budget is stored: the events from the first one past
            # it on are dropped, and the upstream is aborted.
            chunks = self._meter.admit(chunks)
            if self._meter.exhausted is not None and self._meter.exhausted_by is not None:
                self._exhaust(self._meter.exhausted, self._meter.exhausted_by)
            if not chunks:
                return True
        self._pending.extend(chunks)
        self._pending_reads += 1
        if self._inflight is None and self._failure is None:
            self._send()
        return self._pending_reads < _PENDING_READS

    def _send(self) -> None:
        chunks, self._pending, self._pending_reads = self._pending, [], 0
        self._inflight = chunks
        self._inflight_counts, self._pending_counts = self._pending_counts, Counter()
        self._submit()
        _resolve(self._room)
        if self._upstream is not None:
            self._upstream.resume()

    def _submit(self) -> None:
        self._retry = None
        assert self._inflight is not None
        counts = self._inflight_counts
        try:
            future = self.log.submit_append(
                self.run_id,
                self._inflight,
                expected_seq=self._next_seq,
                # The matches count in the statement that stores them (a retry found
                # stored already adds nothing: its first try counted them).
                redaction=Redaction(counts) if counts else None,
            )
        except Exception as exc:  # from a callback: nothing else would hear of it
            self._fail(exc)
            return
        future.add_done_callback(self._appended)

    def _appended(self, future: asyncio.Future[AppendResult]) -> None:
        chunks = self._inflight
        if chunks is None or self._failure is not None:
            return
        error = future.exception() if not future.cancelled() else Unavailable("append cancelled")
        if isinstance(error, Unavailable):
            log.warning("run %s: append failed (%s); retrying", self.run_id, error)
            delay = self._retry_delay
            self._retry_delay = min(delay * 2, _RETRY_MAX_SECONDS)
            self._retry = asyncio.get_running_loop().call_later(delay, self._submit)
            return
        if error is not None:
            self._fail(error)
            return
        self._retry_delay = _RETRY_FIRST_SECONDS
        if self._inflight_counts:
            record(self._inflight_counts)  # committed: /metrics counts what is stored
            self._inflight_counts = Counter()
        self._next_seq = future.result().last_seq + 1
        self._last_type = chunks[-1].type
        self._inflight = None
        if self._pending:
            self._send()
        else:
            _resolve(self._drained)

    def _fail(self, error: BaseException) -> None:
        self._failure = self._failure or error
        if self._reader is not None:
            self._reader.cancel()
        _resolve(self._drained)

    async def _settled(self) -> None:
        """Returns once everything read is appended; raises what stopped the pipeline."""
        while self._failure is None and (self._inflight is not None or self._pending):
            self._drained = asyncio.get_running_loop().create_future()
            await self._drained
        if self._failure is not None:
            raise self._failure

    async def _close(self, reason: EndReason, detail: str) -> None:
        """Close the run as `reason` says, retried like an append; matches no append
        carried (its input's, when the upstream sent nothing) count with the close."""
        delay = _RETRY_FIRST_SECONDS
        counts = self._pending_counts
        while True:
            try:
                await close_run(
                    self.log, self.run_id, self.thread_id, reason, detail,
                    expected_seq=self._next_seq,
                    redaction=Redaction(counts) if counts else None,
                )  # fmt: skip
                if counts:
                    record(counts)
                    self._pending_counts = Counter()
                return
            except Unavailable as exc:
                log.warning("run %s: closing failed (%s); retrying", self.run_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX_SECONDS)

    async def _read(self) -> _End:
        """Feed the upstream's events to the pipeline; why it stopped."""
        if self._stop is not None:  # halted before it started (see `halt`)
            return _End(self._stop, self._stop_detail)
        self._reading = True
        try:
            if isinstance(self._agent, HttpAgent):
                self._upstream = HttpUpstream(
                    self._agent, self._input, self._idle_seconds, self._limits, self._deliver,
                    self._forwarded,
                )  # fmt: skip
                await self._upstream.run()
            else:
                # Closed on leaving, so the agent's own cleanup runs when it is stopped.
                source = upstream.events(self._agent, self._input, self._limits)
                async with aclosing(source) as events:
                    async for batch in events:
                        await self._feed(batch)
                        if self._stop is not None:  # halted from within: its budget
                            break
            if self._stop is EndReason.BUDGET_EXHAUSTED:
                # Its last events were past the budget: dropped, so it did not finish.
                return _End(self._stop, self._stop_detail)
            return _End(EndReason.FINISHED)
        except asyncio.CancelledError:
            # Leaving the upstream request aborts it; say why we stopped.
            return _End(self._stop or EndReason.CANCELLED, self._stop_detail)
        except upstream.UpstreamError as exc:
            return _End(EndReason.UPSTREAM_ERROR, str(exc))
        except Exception as exc:  # an in-process agent's own bug ends its run, not us
            log.exception("agent of run %s failed", self.run_id)
            return _End(EndReason.UPSTREAM_ERROR, f"the agent failed: {exc!r}")

    async def _watch(self) -> None:
        """Cancel the run once nobody has read it for as long as its policy allows.

        Readers are counted in the log, on every process (`agent_replay.stream.presence`):
        a row a process stopped refreshing for a lease's length is a dead one's.
        The watcher looks when its run's last reader leaves (a notification from
        whichever process held it), when the policy's wait runs out, and at
        least every third of a lease: the poll covers a lost notification and
        a reader's process that died without a word.
        """
        lease, policy = self._lease, self.on_disconnect
        poll = lease.interval
        wait = min(poll, policy.wait_seconds(False, self._first_reader_seconds))
        while True:
            await wait_set(self._readers_left, wait)
            self._readers_left.clear()
            wait = poll
            try:
                absence = await self.log.reader_absence(self.run_id, lease.seconds)
            except ReplayError:  # the database is away: judge again soon
                log.warning("run %s: cannot count its readers", self.run_id, exc_info=True)
                wait = min(poll, _RECOUNT_SECONDS)
                continue
            if absence is None or absence.closed:
                return
            if absence.readers:
                continue
            allowed = policy.wait_seconds(absence.left_at is not None, self._first_reader_seconds)
            if absence.absent_seconds >= allowed:
                log.info(
                    "run %s: no reader for %.1f s (on_disconnect %s); cancelling",
                    self.run_id, absence.absent_seconds, policy.policy,
                )  # fmt: skip
                self.halt(EndReason.ABANDONED)
                return
            # Look again the moment the wait runs out (or a notice comes first).
            wait = min(poll, allowed - absence.absent_seconds)


def _resolve(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)
