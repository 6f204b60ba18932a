"""One run's events, filtered by type and receive time.

The scan is bounded by the primary key to one run (`run_id, seq > after`);
the filters apply within it. No extra index on `events`: every index there
is paid by every append, and one run's log is small next to the table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from agent_replay.audit.filters import utc
from agent_replay.log import Event
from agent_replay.log.chunks import storable
from agent_replay.log.rows import BATCH_MAX, events_of
from agent_replay.log.schema import events, run_forks, runs
from agent_replay.log.typefilter import TypeFilter


@dataclass(frozen=True, slots=True)
class EventFilter:
    types: tuple[str, ...] = ()
    # `?types=` (exact types and `PREFIX*`), on top of `types` (`?type=`, exact).
    patterns: TypeFilter | None = None
    # Half-open, like run listings: received_after <= received_at < received_before.
    received_after: datetime | None = None
    received_before: datetime | None = None

    @property
    def empty(self) -> bool:
        return (
            not self.types
            and (self.patterns is None or self.patterns.everything)
            and self.received_after is None
            and self.received_before is None
        )


@dataclass(frozen=True, slots=True)
class _Segment:
    """One run's own rows in a chain: seqs above `lo` (its fork point) up to `hi`."""

    run_id: str
    lo: int
    hi: int | None


async def _segments(conn: AsyncConnection, run_id: str) -> list[_Segment]:
    """Where a run's events are, in seq order: for a fork, its source's up to the fork
    point (shared, not copied: agent_replay.log.streams), down the chain; then its own."""
    chain: list[_Segment] = []
    current, upto = run_id, None
    while True:
        fork = (
            await conn.execute(
                select(run_forks.c.source_run_id, run_forks.c.fork_seq).where(
                    run_forks.c.run_id == current
                )
            )
        ).first()
        chain.append(_Segment(current, 0 if fork is None else fork.fork_seq, upto))
        if fork is None:
            return chain[::-1]
        current, upto = fork.source_run_id, fork.fork_seq


# Past this an `after` only bounds reads (no seq gets near it): room for a limit.
_LAST_START = 2**63 - 1 - 2**40


def _rows_where(segment: _Segment, after: int, limit: int | None) -> list[ColumnElement[bool]]:
    # The run's month names its events' partition: only that one is read.
    month = select(runs.c.run_month).where(runs.c.run_id == segment.run_id).scalar_subquery()
    where = [
        events.c.run_id == segment.run_id,
        events.c.run_month == month,
        events.c.seq > max(segment.lo, after),
    ]
    if segment.hi is not None:
        # A batch row may hold seqs past the fork point (agent_replay.log.rows).
        where += [events.c.seq < segment.hi + BATCH_MAX, events.c.seq - events.c.n < segment.hi]
    if limit is not None:
        # Only the rows holding seqs up to after + limit: unfiltered, that is all a page
        # can use (a run's rows are contiguous), however many events a row holds.
        end = min(after, _LAST_START) + limit
        where += [events.c.seq - events.c.n < end, events.c.seq < end + BATCH_MAX]
    return where


def _kinds_where(f: EventFilter) -> list[ColumnElement[bool]]:
    """The type filters as SQL on single-event rows; a batch row is let through, and its
    events are tested one by one (`_wanted`)."""
    where: list[ColumnElement[bool]] = []
    batch = events.c.n > 1
    if f.types:
        # Stored types went through `storable`; so do the ones asked for.
        where.append(or_(batch, events.c.type.in_([storable(t) for t in f.types])))
    patterns = f.patterns
    if patterns is not None and not patterns.everything:
        where.append(
            or_(
                batch,
                events.c.type.in_(sorted(patterns.exact)),
                *(events.c.type.startswith(p, autoescape=True) for p in patterns.prefixes),
            )
        )
    if f.received_after is not None:
        where.append(events.c.received_at >= utc(f.received_after))
    if f.received_before is not None:
        where.append(events.c.received_at < utc(f.received_before))
    return where


def _wanted(f: EventFilter) -> Callable[[str], bool]:
    """The type filters as a test of one event's type (a batch row's events)."""
    types = frozenset(storable(t) for t in f.types)
    patterns = f.patterns

    def wanted(kind: str) -> bool:
        return (not types or kind in types) and (patterns is None or patterns.matches(kind))

    return wanted


async def read_events(
    conn: AsyncConnection, run_id: str, f: EventFilter, *, after: int = 0, limit: int = 1000
) -> list[Event]:
    found: list[Event] = []
    kinds, wanted = _kinds_where(f), _wanted(f)
    # A filter may skip any number of events: rows are then read `limit` at a time,
    # however many events each holds.
    span = limit if f.empty else None
    for segment in await _segments(conn, run_id):
        start = max(after, segment.lo)
        while len(found) < limit:
            query = (
                select(
                    events.c.seq, events.c.n, events.c.type, events.c.chunk, events.c.received_at
                )
                .where(*_rows_where(segment, start, span), *kinds)
                .order_by(events.c.seq)
                .limit(limit)
            )
            rows = list(await conn.execute(query))
            found += [
                Event(*event) for event in events_of(rows, start, segment.hi) if wanted(event[1])
            ]
            if len(rows) < limit:
                break
            # A page of rows whose events the filter thinned: read on after it.
            start = rows[-1].seq
    return found[:limit]
