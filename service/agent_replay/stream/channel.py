"""A run's channel: one reader task, one read per wake-up, a bounded buffer.

All of a run's followers in this process share it (see `agent_replay.stream.hub`
for what wakes it, `agent_replay.stream.tail` for how a follower uses it). The
buffer is bounded in events and bytes; a follower whose next event was evicted
reads the log itself.

What this process commits reaches the buffer without a read: the committer
hands the channel the committed rows (`offer`), which it takes when they
continue its buffer exactly (the next seq after its head); anything else
(another process's commit in between, rows the reader already read) is only a
hint, and the reader reads the log as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from agent_replay import metrics
from agent_replay.errors import Unavailable
from agent_replay.log.store import Reads
from agent_replay.log.values import Page, Row, RunState
from agent_replay.loopevent import LoopEvent
from agent_replay.stream.framing import Framer
from agent_replay.stream.outlet import Sink

log = logging.getLogger("replay.stream")

_FROM_COMMIT = metrics.STREAM_BUFFERED["commit"]
_FROM_READ = metrics.STREAM_BUFFERED["read"]


class Batch:
    """One page the channel read: contiguous seqs `first..last`, framed lazily once per key.

    A channel keeps up to `Limits.buffer_events` of these, one per commit of a
    live run: hundreds of thousands on a busy process, every one of them walked
    by each full garbage collection. So a batch is one object the collector
    tracks: its rows are a tuple (of (seq, text) tuples, which CPython stops
    tracking once it has seen them hold only ints and strings) and its first
    encoding sits in two slots (a dict only for a second framer key).
    """

    __slots__ = ("_blob", "_key", "_more", "first", "last", "rows", "size")

    def __init__(self, first: int, last: int, rows: Sequence[Row], size: int) -> None:
        self.first = first
        self.last = last
        self.rows: tuple[Row, ...] = tuple(rows)
        self.size = size
        self._key: object = None
        self._blob: bytes | None = None
        self._more: dict[object, bytes] | None = None

    def encoded(self, framer: Framer) -> bytes:
        key = framer.key
        if key is None:
            return framer.frame(self.rows)
        if self._blob is not None and self._key == key:
            return self._blob
        if self._blob is None:
            self._key, self._blob = key, framer.frame(self.rows)
            return self._blob
        more = self._more
        if more is None:
            more = self._more = {}
        blob = more.get(key)
        if blob is None:
            blob = more[key] = framer.frame(self.rows)
        return blob

    def encoded_after(self, cursor: int, framer: Framer) -> bytes:
        if cursor < self.first:
            return self.encoded(framer)
        return framer.frame(self.rows[cursor - self.first + 1 :])


def contiguous(rows: list[Row], after: int) -> bool:
    """Rows are exactly after+1, after+2, ... (they come ordered and unique by seq)."""
    return not rows or (rows[0][0] == after + 1 and rows[-1][0] == after + len(rows))


@dataclass(frozen=True, slots=True)
class Limits:
    page_size: int = 1000
    buffer_events: int = 4096
    buffer_bytes: int = 8 << 20


class Channel:
    """What this process knows about one followed run, and its one reader."""

    def __init__(self, run_id: str, store: Reads, limits: Limits) -> None:
        self.run_id = run_id
        self._store = store
        self._limits = limits
        # The seq up to which the buffer (or the log before the first page) is
        # read; None until a read made after the channel existed anchors it.
        self.head: int | None = None
        # Everything up to `head` is all there will ever be.
        self.complete = False
        self.subscribers = 0
        # Moved by every subscribe: a lingering channel's retirement timer holds
        # the value it saw, and retires the channel only if it is unchanged.
        self.idle_epoch = 0
        # Which life of the run its subscribers know (opaque; see `Hub.subscribe`).
        self.life: object = None
        self.reads = 0
        # The highest last_seq / close any hint announced; kept even before the
        # anchor so a hint arriving in between is not lost.
        self._hint = -1
        self._hint_closed = False
        self._batches: deque[Batch] = deque()
        self._buffered_events = 0
        self._buffered_bytes = 0
        self._loop = asyncio.get_running_loop()
        self._wake = LoopEvent(self._loop)
        # Replaced on every advance: a follower takes the current one *before*
        # looking at the buffer, so an advance in between still wakes it.
        self.advanced = LoopEvent(self._loop)
        # Followers waiting here that take new rows as they come (`agent_replay.stream.outlet`).
        self._sinks: list[Sink] = []
        self._task = asyncio.create_task(self._read_forever(), name=f"stream-channel:{run_id}")

    # -- what the hub and followers tell the channel ------------------------

    def anchor(self, state: RunState) -> None:
        """A read made after the channel existed: the log's truth at that moment."""
        if self.head is None:
            self.head = state.last_seq
            if state.closed:
                self.complete = True
                self._advance()
        self.announce(state.last_seq, state.closed)

    def announce(self, last_seq: int, closed: bool) -> None:
        """A hint (notification or re-check): the log may be at `last_seq`."""
        self._hint = max(self._hint, last_seq)
        self._hint_closed = self._hint_closed or closed
        if self._behind():
            self._wake.set()

    def offer(self, rows: list[Row] | None, last_seq: int, closed: bool) -> None:
        """Rows this process committed (seqs up to `last_seq`, `closed` if that commit
        closed the run): buffered at once when they continue the buffer, else a hint."""
        head = self.head
        if rows is not None and not self.complete and head is not None:
            if rows and rows[0][0] <= head:
                # Some were read already (the reader's read began after this commit).
                rows = [row for row in rows if row[0] > head]
            if (rows and rows[0][0] == head + 1 and rows[-1][0] == last_seq) or (
                not rows and last_seq == head
            ):
                self._hint = max(self._hint, last_seq)
                self._hint_closed = self._hint_closed or closed
                if rows:
                    self._buffer(rows)
                    _FROM_COMMIT.inc(len(rows))
                if closed:
                    self.complete = True
                if rows or closed:
                    self._advance()
                return
        self.announce(last_seq, closed)

    def _behind(self) -> bool:
        return (
            self.head is not None
            and not self.complete
            and (self._hint > self.head or self._hint_closed)
        )

    # -- what followers read ------------------------------------------------

    def pending(self, cursor: int, framer: Framer) -> tuple[bytes, int] | None:
        """Everything buffered after `cursor`, as one blob, and its last seq.

        None when the buffer has nothing after `cursor`, or no longer holds
        `cursor + 1` (the follower then reads the log itself).
        """
        head = self.head
        batches = self._batches
        if head is None or head <= cursor or not batches:
            return None
        index = len(batches) - 1
        while index > 0 and batches[index - 1].last > cursor:
            index -= 1
        start = batches[index]
        if start.first > cursor + 1:
            return None
        parts = [start.encoded_after(cursor, framer)]
        parts.extend(batches[i].encoded(framer) for i in range(index + 1, len(batches)))
        return (parts[0] if len(parts) == 1 else b"".join(parts)), batches[-1].last

    def rows_after(self, cursor: int) -> list[Row] | None:
        """The buffered rows after `cursor`, unencoded (for encodings of their own,
        as Durable Streams' framing); None exactly when `pending` would be."""
        head = self.head
        batches = self._batches
        if head is None or head <= cursor or not batches:
            return None
        index = len(batches) - 1
        while index > 0 and batches[index - 1].last > cursor:
            index -= 1
        start = batches[index]
        if start.first > cursor + 1:
            return None
        rows = list(start.rows[cursor - start.first + 1 :] if cursor >= start.first else start.rows)
        for batch in list(batches)[index + 1 :]:
            rows.extend(batch.rows)
        return rows

    # -- the reader ---------------------------------------------------------

    async def _read_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self._behind():
                # A hint that arrived while the last read ran, and that read
                # already covered it (the in-process commit hook and the NOTIFY
                # announce the same append): one read per append, not two.
                continue
            # The NOTIFY of this process's own commit often comes before the
            # committer hands over its rows: once it has, look again.
            await self._store.settled(self.run_id)
            if not self._behind():
                continue
            try:
                await self._read_ahead()
            except Unavailable as exc:
                log.warning("stream: reading run %s failed, retrying: %s", self.run_id, exc)
                self._loop.call_later(0.5, self._wake.set)
            except Exception:
                # The reader must outlive any one failure: its followers wait on it.
                log.exception("stream: reading run %s failed, retrying", self.run_id)
                self._loop.call_later(0.5, self._wake.set)

    async def _read_ahead(self) -> None:
        page_size = self._limits.page_size
        while self.head is not None and not self.complete:
            page = await self._store.read_page(self.run_id, self.head, page_size)
            self.reads += 1
            if page is None:
                # The run is gone (erased, pruned): nothing more will ever come. Its
                # followers look again, find no run and end as a closed run's do.
                self.complete = True
                self._advance()
                return
            if not self._take(page) or len(page.rows) < page_size:
                return

    def _take(self, page: Page) -> bool:
        """Buffer a page the reader read after the head it started from; whether to read on."""
        assert self.head is not None
        rows = page.rows
        if rows and rows[0][0] <= self.head:
            # The commit hook buffered some of these while the read was under way.
            rows = [row for row in rows if row[0] > self.head]
        if not contiguous(rows, self.head):
            # Cannot happen while seqs are gap-free and committed in order;
            # followers then read the log themselves rather than trust this.
            log.error("stream: run %s read out of order after %s", self.run_id, self.head)
            return False
        if rows:
            self._buffer(rows)
            _FROM_READ.inc(len(rows))
        complete = page.complete and self.head >= page.state.last_seq and not self.complete
        if complete:
            self.complete = True
        if rows or complete:
            self._advance()
        return bool(page.rows)

    def _buffer(self, rows: list[Row]) -> None:
        """Rows right after the head (contiguous), as one batch."""
        size = len(rows[0][1]) if len(rows) == 1 else sum(len(chunk) for _, chunk in rows)
        self._batches.append(Batch(rows[0][0], rows[-1][0], rows, size))
        self._buffered_events += len(rows)
        self._buffered_bytes += size
        self.head = rows[-1][0]
        self._evict()

    def _evict(self) -> None:
        limits = self._limits
        while len(self._batches) > 1 and (
            self._buffered_events > limits.buffer_events
            or self._buffered_bytes > limits.buffer_bytes
        ):
            old = self._batches.popleft()
            self._buffered_events -= old.last - old.first + 1
            self._buffered_bytes -= old.size

    def attach(self, sink: Sink) -> None:
        """`sink` takes every advance from now on, until it wakes or is detached."""
        self._sinks.append(sink)

    def detach(self, sink: Sink) -> None:
        with contextlib.suppress(ValueError):
            self._sinks.remove(sink)

    def _advance(self) -> None:
        done, self.advanced = self.advanced, LoopEvent(self._loop)
        done.set()
        if self._sinks:
            for sink in tuple(self._sinks):
                try:
                    sink.advanced(self)
                except Exception:  # one follower's failure is its own: its task takes over
                    log.exception("stream: writing to a follower of run %s failed", self.run_id)
                    sink.wake()

    def nudge(self) -> None:
        """Wake the followers waiting on `advanced` with nothing new, so they look again
        (the hub's drain: a live read that sees the process draining ends)."""
        done, self.advanced = self.advanced, LoopEvent(self._loop)
        done.set()

    def retire(self) -> None:
        """Stop following, and let the buffer go now. The cancelled reader's traceback
        holds its frame, which holds this channel: a cycle only the garbage collector
        frees, and with it every buffered batch. After a few hundred runs ended, their
        buffers waited for one collection that walked them all, a loop pause long enough
        to fail the next capacity trial (ops/bench/capacity.py)."""
        self._task.cancel()
        self._batches.clear()
        self._buffered_events = self._buffered_bytes = 0
        for sink in self._sinks:
            sink.wake()

    async def close(self) -> None:
        self.retire()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._advance()
