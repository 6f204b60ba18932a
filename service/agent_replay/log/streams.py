"""Durable Streams' state in the log: lookups, creation, guarded appends, forks, deletion.

A stream *is* a run (its statements: the Durable Streams section of `queries.sql`):
its messages are the run's events, its offsets the run's seqs. What the protocol
adds lives in small tables beside `runs`, and every change to them is made in the
same transaction as the events it concerns:

* creation (the run, the stream row, a fork's link, initial content, closing)
  is one transaction, so a refused PUT leaves nothing behind;
* an append carrying producer headers or `Stream-Seq` locks the run row,
  validates against the stored producer / writer state, appends and records
  the new state before one commit: a retry after a crash is a duplicate,
  never a second copy;
* a fork shares its source's prefix: `run_forks` says "seqs up to N are the
  source's", and reads stitch (never a copy: `agent_replay.log.reading`).

Plain appends (no guard) take the group committer like any run's. The
protocol's rules (which header means what, which status) live in
`agent_replay.durable`; this module only keeps the state consistent.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, TypeVar

import asyncpg
import orjson

from agent_replay import metrics
from agent_replay.errors import (
    ForkThreadConflict,
    ProducerEpochSeq,
    ProducerFenced,
    ProducerSeqGap,
    RunNotDeletable,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    StreamSeqConflict,
)
from agent_replay.log import expiry, partitions, reading
from agent_replay.log.eventlog import EventLog
from agent_replay.log.faults import translated
from agent_replay.log.request import Group, thread_of
from agent_replay.log.sql import QUERIES
from agent_replay.log.store import RUN_ID
from agent_replay.log.values import Held, Redaction, StoredChunk

_T = TypeVar("_T")

# An append's redaction from its run's hold (`agent_replay.ingest.redact_locked` with the
# rules): (the hold as read under the run's lock, the chunks, close) -> (what to store,
# what its statement writes).
Redact = Callable[[Held, Sequence[StoredChunk], bool], tuple[Sequence[StoredChunk], Redaction]]

_LOOKUP = QUERIES["stream_lookup"]
_LOCK = QUERIES["stream_lock"]
_LOCK_RUN = QUERIES["stream_lock_run"]
_INSERT_STREAM = QUERIES["stream_insert_stream"]
_ADOPT_RUN = QUERIES["stream_adopt_run"]
_INSERT_RUN = QUERIES["stream_insert_run"]
_SET_THREAD = QUERIES["stream_set_thread"]
_SET_DELETABLE = QUERIES["stream_set_deletable"]
_SOURCE_THREAD = QUERIES["stream_source_thread"]
_RUN_EXISTS = QUERIES["stream_run_exists"]
_INSERT_FORK = QUERIES["stream_insert_fork"]
_SET_CHAIN_HEAD = QUERIES["set_chain_head"]
_SET_STREAM_SEQ = QUERIES["stream_set_stream_seq"]
_SET_CLOSED_BY = QUERIES["stream_set_closed_by"]
_SOFT_DELETE = QUERIES["stream_soft_delete"]
_PRODUCER = QUERIES["stream_producer"]
_SET_PRODUCER = QUERIES["stream_set_producer"]
_DELETE_RUN = QUERIES["stream_delete_run"]
_ORPHANED = QUERIES["stream_orphaned"]
_LAST_SEQ = QUERIES["stream_last_seq"]


@dataclass(frozen=True, slots=True)
class StreamState:
    """A stream as one read saw it (run state and stream settings together)."""

    name: str
    run_id: str
    last_seq: int
    closed: bool
    # False for a run with no `streams` row: it reads as application/json.
    stored: bool
    content_type: str
    ttl_seconds: int | None
    expires_at: datetime | None
    stream_seq: str | None
    closed_by: str | None
    fork_spec: str | None
    deleted: bool
    expired: bool
    # Some fork reads this run's prefix.
    forked: bool
    # This run is a fork: its seqs up to fork_seq are its source's.
    fork_seq: int | None
    # When the run was made: a name deleted and created again is another stream
    # under the same run id, so what was read of the first must not serve the second.
    created_at: datetime

    @classmethod
    def of(cls, name: str, row: asyncpg.Record) -> StreamState:
        return cls(
            name=name,
            run_id=row["run_id"],
            last_seq=row["last_seq"],
            closed=row["closed"],
            stored=row["stored"],
            content_type=row["content_type"] or JSON_TYPE,
            ttl_seconds=row["ttl_seconds"],
            expires_at=row["expires_at"],
            stream_seq=row["stream_seq"],
            closed_by=row["closed_by"],
            fork_spec=row["fork_spec"],
            deleted=row["deleted"],
            expired=row["expired"],
            forked=row["forked"],
            fork_seq=row["fork_seq"],
            created_at=row["created_at"],
        )


JSON_TYPE = "application/json"


def run_id_for(name: str) -> str:
    """The run behind a stream name: the name itself when it is a valid run id.

    Other names (with `/`, too long, other characters) get a derived id, so
    every stream is still a run the rest of the service can list and read.
    """
    if RUN_ID.fullmatch(name):
        return name
    return "ds-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class NewStream:
    """What a PUT asks for, resolved (a fork's source found, its point checked)."""

    name: str
    content_type: str
    ttl_seconds: int | None
    expires_at: datetime | None
    closed: bool
    # How the fork was asked for (compared by an idempotent PUT); None: no fork.
    fork_spec: str | None = None
    fork_source_run: str | None = None
    fork_seq: int = 0
    # Made by PUT /v1/stream, so DELETE may remove it; the run API's fork is not.
    deletable: bool = True


@dataclass(frozen=True, slots=True)
class Producer:
    producer_id: str
    epoch: int
    seq: int

    def key(self) -> str:
        return orjson.dumps([self.producer_id, self.epoch, self.seq]).decode()

    def key_parts(self) -> tuple[str, int, int]:
        """(id, epoch, seq), as a group-committed append carries them."""
        return (self.producer_id, self.epoch, self.seq)


@dataclass(frozen=True, slots=True)
class Written:
    """An append's outcome: where the stream is now, and whether it was a retry."""

    last_seq: int
    closed: bool
    duplicate: bool = False
    # The highest producer seq accepted in this epoch (for Producer-Seq).
    producer_seq: int | None = None


def _run_id_param(name: str) -> str | None:
    return name if RUN_ID.fullmatch(name) else None


class StreamStore:
    """The log's Durable Streams API (one per process, beside the `EventLog`)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log
        self.pool = log.pool

    # -- reads of state -----------------------------------------------------

    async def lookup(self, name: str, *, touch: bool) -> StreamState | None:
        """The stream, or None (never created, deleted, expired). Soft-deleted: `StreamGone`."""
        with translated("the event log cannot be read"):
            async with self.pool.acquire() as conn:
                row = await conn.fetchrow(_LOOKUP, name, _run_id_param(name), touch)
        if row is None:
            return None
        state = StreamState.of(name, row)
        if state.expired:
            return None
        if state.deleted:
            raise StreamGone(name)
        return state

    async def read(
        self, state: StreamState, after: int, upto: int, limit: int
    ) -> list[tuple[int, str]]:
        """Events after `after` up to `upto`, at most `limit`, a fork's prefix included."""
        forked = state.fork_seq is not None
        return await reading.chunks(self.pool, state.run_id, after, upto, limit, forked=forked)

    async def read_json(
        self, state: StreamState, after: int, upto: int, limit: int, max_bytes: int
    ) -> tuple[int, int, str]:
        """A JSON stream's messages after `after` as (count, last seq, "m1,m2,...").

        At most `limit` messages and about `max_bytes` (never fewer than one).
        """
        forked = state.fork_seq is not None
        return await reading.json_messages(
            self.pool, state.run_id, after, upto, limit, max_bytes, forked=forked
        )

    async def chunk_at(self, run_id: str, seq: int) -> str | None:
        return await reading.chunk_at(self.pool, run_id, seq)

    # -- creation -------------------------------------------------------------

    async def create(
        self, new: NewStream, chunks: Sequence[StoredChunk], redact: Redact | None = None
    ) -> tuple[StreamState, bool]:
        """Create the stream (and its run), or find it already there as asked: (state, created).

        An existing stream with another configuration, a soft-deleted one, or
        an expired one that forks still read is a `StreamConflict`. An expired
        stream nobody reads is replaced. `redact`: as for `append_guarded`, over the
        initial content, from the new run (which holds nothing yet).
        """
        run_id = run_id_for(new.name)
        stored: list[Sequence[StoredChunk]] = [chunks]  # what the last attempt stored

        async def attempt() -> tuple[StreamState, bool]:
            async with self.pool.acquire() as conn, conn.transaction():
                inserted = await self._insert_stream(conn, new, run_id)
                if not inserted:
                    row = await conn.fetchrow(_LOCK, new.name)
                    if row is None:
                        raise StreamConflict(
                            f"stream {new.name!r} maps to run {run_id!r}, which another "
                            "stream already uses"
                        )
                    existing = StreamState.of(new.name, row)
                    if existing.deleted:
                        raise StreamConflict(
                            f"stream {new.name!r} was deleted but forks still read it; "
                            "its name cannot be reused until they are deleted"
                        )
                    if not existing.expired:
                        _check_same(existing, new)
                        return existing, False
                    if existing.forked:
                        raise StreamConflict(
                            f"stream {new.name!r} expired but forks still read it; "
                            "its name cannot be reused until they are deleted"
                        )
                    await _delete_run(conn, existing.run_id)
                    if not await self._insert_stream(conn, new, run_id):
                        raise StreamConflict(f"stream {new.name!r} was created concurrently")
                if (
                    await conn.fetchval(
                        _INSERT_RUN,
                        run_id,
                        new.fork_seq,
                        thread_of(list(chunks)),
                        new.fork_source_run,
                    )
                    is None
                ):
                    # A run written through the run API, seen as a stream for the
                    # first time: it is application/json, open or closed as it is.
                    row = await conn.fetchrow(_LOCK_RUN, run_id)
                    assert row is not None
                    existing = replace(
                        StreamState.of(new.name, row),
                        content_type=JSON_TYPE,
                        ttl_seconds=None,
                        expires_at=None,
                        fork_spec=None,
                    )
                    _check_same(existing, new)
                    return existing, False
                if new.deletable:
                    await conn.execute(_SET_DELETABLE, new.name)
                if new.fork_source_run is not None:
                    await _check_fork_thread(conn, new, chunks)
                    await conn.execute(_INSERT_FORK, run_id, new.fork_source_run, new.fork_seq)
                    # A fork's chain is the chain of the events it reads as its own: its
                    # head starts at its source's hash at the fork point (NULL while the
                    # source is not chained: the backfill then chains the fork too).
                    if new.fork_seq:
                        head = await reading.hash_at(conn, new.fork_source_run, new.fork_seq)
                        await conn.execute(_SET_CHAIN_HEAD, run_id, head)
                out: Sequence[StoredChunk] = chunks
                if chunks or new.closed:
                    redaction: Redaction | None = None
                    if redact is not None:
                        made = await conn.fetchrow(_LOCK_RUN, run_id)
                        assert made is not None
                        held = Held(made["last_seq"], False, made["redaction_hold"])
                        out, redaction = redact(held, chunks, new.closed)
                    await _append(
                        conn,
                        run_id,
                        out,
                        close=new.closed,
                        batch_min=self.log.batch_min,
                        redaction=redaction,
                    )
                stored[0] = out
                row = await conn.fetchrow(_LOCK, new.name)
            assert row is not None
            return StreamState.of(new.name, row), True

        with translated("the event log cannot be written"):
            state, created = await self._made_partitions(run_id, attempt)
        if created:
            _committed(stored[0])
            self.log.announce(run_id, state.last_seq, state.closed)
        return state, created

    async def _made_partitions(self, run_id: str, attempt: Callable[[], Awaitable[_T]]) -> _T:
        """`attempt` (one transaction), once more after making the partition `events`
        had none for: the run's month, or this month for a run the attempt made (as
        the group commit does; see agent_replay.log.partitions)."""
        try:
            return await attempt()
        except asyncpg.CheckViolationError as error:
            if not partitions.no_partition(error):
                raise
        await partitions.ensure_for_runs(self.pool, [run_id])
        await partitions.ensure_ahead(self.pool)
        return await attempt()

    async def _insert_stream(self, conn: Any, new: NewStream, run_id: str) -> bool:
        inserted = await conn.fetchval(
            _INSERT_STREAM,
            new.name,
            run_id,
            new.content_type,
            new.ttl_seconds,
            new.expires_at,
            new.fork_spec,
        )
        return inserted is not None

    async def adopt_thread(self, run_id: str, chunks: Sequence[StoredChunk]) -> None:
        """Give a run its thread from a RUN_STARTED in `chunks`, if it has none yet."""
        thread = thread_of(list(chunks))
        if thread is not None:
            with translated("the event log cannot be written"):
                await self.pool.execute(_SET_THREAD, run_id, thread)

    # -- guarded appends ------------------------------------------------------

    async def append_guarded(
        self,
        state: StreamState,
        chunks: Sequence[StoredChunk],
        *,
        close: bool,
        producer: Producer | None,
        stream_seq: str | None,
        redact: Redact | None = None,
    ) -> Written:
        """Append (and/or close) under the run's lock, checking and recording the
        producer's and the writer's sequence in the same transaction. `redact`: the
        redaction of `chunks` from the run's hold, read under that lock once the append
        is known to be no retry (a producer's duplicate is answered before it); what it
        makes is stored, and its counts and new hold written, by the append's statement."""
        run_id = state.run_id
        stored: list[Sequence[StoredChunk]] = [chunks]  # what the last attempt stored

        async def attempt() -> tuple[Written, bool]:
            async with self.pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(_LOCK_RUN, run_id)
                if row is None:
                    raise StreamNotFound(state.name)
                now = StreamState.of(state.name, row)
                if now.created_at != state.created_at:
                    raise StreamNotFound(state.name)  # deleted and made again since `state`
                if now.deleted:
                    raise StreamGone(state.name)
                accepted_seq: int | None = None
                if producer is not None:
                    if now.closed:
                        if now.closed_by == producer.key():
                            return Written(now.last_seq, True, True, producer.seq), False
                        raise StreamClosed(state.name, now.last_seq)
                    known = await conn.fetchrow(_PRODUCER, run_id, producer.producer_id)
                    duplicate_of = _check_producer(known, producer)
                    if duplicate_of is not None:
                        return Written(now.last_seq, now.closed, True, duplicate_of), False
                    accepted_seq = producer.seq
                elif now.closed:
                    if close and not chunks:
                        return Written(now.last_seq, True, True), False
                    raise StreamClosed(state.name, now.last_seq)
                if (
                    stream_seq is not None
                    and now.stream_seq is not None
                    and (stream_seq.encode() <= now.stream_seq.encode())
                ):
                    raise StreamSeqConflict(
                        f"Stream-Seq {stream_seq!r} is not after the last one ({now.stream_seq!r})"
                    )
                needs_row = stream_seq is not None or (producer is not None and close)
                if needs_row and not now.stored:
                    await conn.execute(_ADOPT_RUN, run_id)
                last_seq = now.last_seq
                out: Sequence[StoredChunk] = chunks
                redaction: Redaction | None = None
                if chunks or close:
                    if redact is not None:
                        held = Held(now.last_seq, now.closed, row["redaction_hold"])
                        out, redaction = redact(held, chunks, close)
                    # Run even when redaction held all it was sent: the hold is written.
                    last_seq = await _append(
                        conn,
                        run_id,
                        out,
                        close=close,
                        batch_min=self.log.batch_min,
                        redaction=redaction,
                    )
                    thread = thread_of(list(out))
                    if thread is not None:
                        await conn.execute(_SET_THREAD, run_id, thread)
                if producer is not None:
                    await conn.execute(
                        _SET_PRODUCER, run_id, producer.producer_id, producer.epoch, producer.seq
                    )
                    if close:
                        await conn.execute(_SET_CLOSED_BY, run_id, producer.key())
                if stream_seq is not None:
                    await conn.execute(_SET_STREAM_SEQ, run_id, stream_seq)
            stored[0] = out
            return Written(last_seq, close, False, accepted_seq), True

        with translated("the event log cannot be written"):
            written, appended = await self._made_partitions(run_id, attempt)
        if appended:
            _committed(stored[0])
            self.log.announce(run_id, written.last_seq, close)
        return written

    # -- deletion -------------------------------------------------------------

    async def delete(self, name: str) -> None:
        """Delete the stream and its run; soft-delete it while forks read its prefix.

        Only a stream a PUT made with its run: any other run (the run API's, a hosted
        one, one first seen as a stream later) is `RunNotDeletable`, left as it is.
        """
        with translated("the event log cannot be written"):
            async with self.pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(_LOCK, name)
                if row is None:
                    run_id = _run_id_param(name)
                    if run_id is not None and await conn.fetchval(_RUN_EXISTS, run_id):
                        raise RunNotDeletable(name)
                    raise StreamNotFound(name)
                if not row["deletable"]:
                    raise RunNotDeletable(name)
                state = StreamState.of(name, row)
                if state.deleted:
                    raise StreamGone(name)
                if state.expired and not state.forked:
                    await _delete_run(conn, state.run_id)
                    raise StreamNotFound(name)
                if state.forked:
                    if not state.stored:
                        await conn.execute(_ADOPT_RUN, state.run_id)
                    await conn.execute(_SOFT_DELETE, state.run_id)
                    # Closed too: an append that skips the lookup (a name a process
                    # remembers) is then refused by the append statement itself.
                    last_seq = None
                    if not state.closed:
                        last_seq = await _append(
                            conn, state.run_id, [], close=True, batch_min=self.log.batch_min
                        )
                else:
                    await _delete_run(conn, state.run_id)
                    return
        if last_seq is not None:
            self.log.announce(state.run_id, last_seq, True)

    # -- expiry ---------------------------------------------------------------

    async def sweep_expired(
        self,
        *,
        batch_events: int = 10_000,
        max_streams: int | None = None,
        max_rate: float | None = None,
    ) -> expiry.SweepReport:
        """Delete expired streams (and soft-deleted ones no fork reads), each whole.
        On Citus nothing: Durable Streams are not served there (docs/scale-out.md), and
        the sweep's statements lock a stream with its run, which Citus refuses."""
        if self.log.citus:
            return expiry.SweepReport()
        return await expiry.sweep(
            self.pool,
            _delete_run,
            batch_events=batch_events,
            max_streams=max_streams,
            max_rate=max_rate,
        )

    async def count_sweepable(self) -> expiry.SweepReport:
        if self.log.citus:
            return expiry.SweepReport()  # as `sweep_expired`
        return await expiry.count_sweepable(self.pool)


async def _check_fork_thread(conn: Any, new: NewStream, chunks: Sequence[StoredChunk]) -> None:
    """A fork is on its source's thread: a body starting a run on another is refused."""
    named = thread_of(list(chunks))
    if named is None:
        return
    source_thread = await conn.fetchval(_SOURCE_THREAD, new.fork_source_run)
    if named != source_thread:
        raise ForkThreadConflict(
            f"a fork stays on its source's thread; this body's RUN_STARTED names {named!r}"
        )


def _check_same(existing: StreamState, new: NewStream) -> None:
    same = (
        _media_type(existing.content_type) == _media_type(new.content_type)
        and existing.ttl_seconds == new.ttl_seconds
        and existing.expires_at == new.expires_at
        and existing.closed == new.closed
        and existing.fork_spec == new.fork_spec
    )
    if not same:
        raise StreamConflict(
            f"stream {existing.name!r} exists with another configuration "
            "(content type, TTL, expiry, closed state or fork)"
        )


def _media_type(content_type: str) -> str:
    return content_type.split(";", 1)[0].strip().lower()


def _check_producer(known: asyncpg.Record | None, producer: Producer) -> int | None:
    """Validate a producer's request against its stored state (PROTOCOL.md 5.2.1).

    Returns None to accept, the highest accepted seq for a duplicate, or raises.
    """
    if known is None:
        if producer.seq != 0:
            raise ProducerSeqGap(0, producer.seq)
        return None
    epoch, last = known["epoch"], known["seq"]
    if producer.epoch < epoch:
        raise ProducerFenced(epoch)
    if producer.epoch > epoch:
        if producer.seq != 0:
            raise ProducerEpochSeq(
                f"a new producer epoch ({producer.epoch}) must start at Producer-Seq 0"
            )
        return None
    if producer.seq <= last:
        return int(last)
    if producer.seq == last + 1:
        return None
    raise ProducerSeqGap(last + 1, producer.seq)


def _committed(chunks: Sequence[StoredChunk]) -> None:
    """Count a committed stream write: its own transaction, so its own commit's size."""
    if chunks:
        metrics.EVENTS_APPENDED.inc(len(chunks))
        metrics.GROUP_COMMIT_EVENTS.observe(len(chunks))


async def _append(
    conn: Any,
    run_id: str,
    chunks: Sequence[StoredChunk],
    *,
    close: bool,
    batch_min: int | None,
    redaction: Redaction | None = None,
) -> int:
    """The log's append statement for one run, inside the caller's transaction, in the
    log's layout (`batch_min`, see EventLog); `redaction` written by it too."""
    group = Group.one(run_id, chunks, close=close, batch_min=batch_min, redaction=redaction)
    n = len(chunks)
    statement, params = group.statement()
    rows = await conn.fetch(statement, *params)
    if not rows:
        last = await conn.fetchval(_LAST_SEQ, run_id)
        raise StreamClosed(run_id, int(last or 0))
    return int(rows[0]["base"]) + n


async def _delete_run(conn: Any, run_id: str) -> None:
    """Delete a run and everything of it; then any soft-deleted source it was the last fork of."""
    source = await conn.fetchval(_DELETE_RUN, run_id)
    while source is not None and await conn.fetchval(_ORPHANED, source):
        source = await conn.fetchval(_DELETE_RUN, source)
