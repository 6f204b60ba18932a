"""Replay then tail: one follower's exactly-once, in-order delivery of a run.

`plan_stream` settles what a request is owed before any byte is sent (404,
409 offset_out_of_range, or "nothing more, ever" for a 204). `tail` then
yields the run's events after the cursor as pre-encoded blobs until the run
is closed and everything was delivered.

Exactly once, in order, by construction:

* The follower subscribes to the run's channel *before* its first read, so
  every commit after that read wakes the channel (or the re-check catches it).
* It keeps one cursor: the last seq it yielded. Whatever it yields next starts
  at `cursor + 1` and is contiguous, whether it comes from the channel's
  shared buffer or from its own read of the log; anything else is refused.
  Duplicated, late or lost hints change only *when* it reads, never *what*.
* When the buffer no longer holds `cursor + 1` (the follower was slow, or
  joined before the channel's first page) it reads the log after the cursor
  itself: the hole is filled from the truth, not from memory.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Final, Literal

from agent_replay import metrics
from agent_replay.errors import InvalidOffset, OffsetOutOfRange, RunNotFound, Unavailable
from agent_replay.log import Page, check_run_id
from agent_replay.stream.channel import contiguous
from agent_replay.stream.framing import Framer
from agent_replay.stream.hub import Hub
from agent_replay.stream.outlet import Outlet, Sink

log = logging.getLogger("replay.stream")

NOW: Final = "now"
# A follower re-reads at most this long after a failed read (the database is away).
_READ_RETRY_MAX_SECONDS = 1.0
Offset = int | Literal["now"]

_SEQ = re.compile(r"[0-9]{1,20}")


def parse_offset(text: str) -> Offset:
    """`-1` (from the start), `now` (only what comes next) or a seq already delivered."""
    value = text.strip()
    if value == "-1":
        return 0
    if value.lower() == NOW:
        return NOW
    if _SEQ.fullmatch(value):
        return int(value)
    raise InvalidOffset(
        f"offset {text[:40]!r} is not -1, 'now' or a sequence number (0 or more)",
        offset=text[:40],
    )


def resolve_offset(last_event_id: str | None, offset: str | None) -> Offset:
    """The `Last-Event-ID` header wins over `?offset=` (a TanStack join reconnects with both)."""
    if last_event_id is not None and last_event_id.strip():
        return parse_offset(last_event_id)
    if offset is not None:
        return parse_offset(offset)
    return 0


@dataclass(frozen=True, slots=True)
class Plan:
    run_id: str
    cursor: int
    last_seq: int
    closed: bool

    @property
    def exhausted(self) -> bool:
        """Closed, and the client has everything: nothing will ever follow."""
        return self.closed and self.cursor >= self.last_seq


async def plan_stream(hub: Hub, run_id: str, offset: Offset) -> Plan:
    check_run_id(run_id)
    hub.refuse_if_draining()
    state = (await hub.store.read_states([run_id])).get(run_id)
    if state is None:
        raise RunNotFound(run_id)
    cursor = state.last_seq if offset == NOW else offset
    if cursor > state.last_seq:
        # A client must never wait on an id this server does not have.
        raise OffsetOutOfRange(
            f"offset {cursor} is beyond run {run_id!r}'s last event ({state.last_seq})",
            last_seq=state.last_seq,
        )
    return Plan(run_id, cursor, state.last_seq, state.closed)


_SENT_BY_FOLLOWER = metrics.STREAM_EVENTS_SENT["follower"]
_SENT_BY_COMMIT = metrics.STREAM_EVENTS_SENT["commit"]


def _count_sent(events: int, lag: int, by: metrics.LoopCounter = _SENT_BY_FOLLOWER) -> None:
    """`events` about to be written (`by` the follower's task, or a sink's commit);
    `lag`: events known to exist past them."""
    by.inc(events)
    metrics.FOLLOWER_LAG.observe(lag)


# What a sink wrote (`agent_replay.stream.outlet`).
_count_written = functools.partial(_count_sent, by=_SENT_BY_COMMIT)


class OutOfOrder(RuntimeError):
    """The log answered with a gap: never deliver past it."""


async def _read_page(hub: Hub, run_id: str, cursor: int, page_size: int) -> Page | None:
    """A follower's read of the log, retried while the database is away: the response
    stays open (its heartbeats go on) and resumes where it was once the log answers."""
    delay = 0.05
    while True:
        try:
            return await hub.store.read_page(run_id, cursor, page_size, catch_up=True)
        except Unavailable as exc:
            log.warning("stream: reading run %s failed, retrying: %s", run_id, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, _READ_RETRY_MAX_SECONDS)


async def tail(
    hub: Hub, plan: Plan, framer: Framer, *, preamble: bytes = b"", outlet: Outlet | None = None
) -> AsyncIterator[bytes]:
    """The run's events after `plan.cursor`, as blobs, until the run is closed and delivered.

    `framer` turns rows into bytes (an `Encoding`, or one that filters or adds
    to them: see `agent_replay.stream.audience`); a page it frames to nothing is not
    written, but the cursor moves past it all the same. `preamble` goes out
    with the first write (the SSE `retry:` hint). With an `outlet` (the
    response's, see `agent_replay.stream.outlet`), a caught-up follower's events
    are written by the commits that buffer them while it waits.
    """
    run_id, cursor = plan.run_id, plan.cursor
    page_size = hub.limits.page_size
    # The highest seq known to exist, and where the run ends once it is closed.
    known = cursor
    end: int | None = None
    read_yet = False
    with hub.subscribe(run_id) as sub:
        channel = sub.channel
        while True:
            advanced = channel.advanced
            buffered = channel.pending(cursor, framer)
            if buffered is not None:
                blob, last = buffered
                _count_sent(last - cursor, max(known, channel.head or 0) - last)
                cursor = last
                if blob:
                    yield preamble + blob if preamble else blob
                    preamble = b""
                continue
            if not read_yet or cursor < max(known, channel.head or 0):
                page = await _read_page(hub, run_id, cursor, page_size)
                hub.follower_reads += 1
                if page is None:
                    if read_yet:
                        # Gone while followed (erased, or pruned): it ends as a closed
                        # run's stream does, after the last event sent.
                        if preamble:
                            yield preamble
                        return
                    raise RunNotFound(run_id)
                read_yet = True
                channel.anchor(page.state)
                known = max(known, page.state.last_seq)
                if page.state.closed:
                    end = page.state.last_seq
                rows = page.rows
                # Judged against this read's own snapshot only: the channel may
                # have read further since this read began.
                if not contiguous(rows, cursor) or (not rows and cursor < page.state.last_seq):
                    raise OutOfOrder(f"run {run_id!r}: the log skipped past seq {cursor}")
                if rows:
                    cursor = rows[-1][0]
                    _count_sent(len(rows), max(known, channel.head or 0) - cursor)
                    blob = framer.frame(rows)
                    if blob:
                        yield preamble + blob if preamble else blob
                        preamble = b""
                continue
            if (end is not None and cursor >= end) or (
                channel.complete and channel.head is not None and cursor >= channel.head
            ):
                if preamble:
                    yield preamble
                return
            if preamble:
                yield preamble
                preamble = b""
            write = outlet.write if outlet is not None else None
            if write is None or advanced.is_set():
                await advanced.wait()
                continue
            sink = Sink(cursor, framer, write, _count_written)
            channel.attach(sink)
            try:
                await sink.attention.wait()
            finally:
                channel.detach(sink)
                cursor = sink.cursor
            if sink.unsent is not None:
                blob, last = sink.unsent
                _count_sent(last - cursor, max(known, channel.head or 0) - last)
                cursor = last
                yield blob
