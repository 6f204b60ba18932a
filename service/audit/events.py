"""One run's events, filtered by type and receive time.

The scan is bounded by the primary key to one run (`run_id, seq > after`);
the filters apply within it. No extra index on `events`: every index there
is paid by every append, and one run's log is small next to the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from service.audit.filters import utc
from service.log import Event
from service.log.chunks import storable
from service.log.schema import events, run_forks, runs
from service.log.typefilter import TypeFilter


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


async def _segments(conn: AsyncConnection, run_id: str) -> list[ColumnElement[bool]]:
    """Where a run's events are: its own rows and, for a fork, its source's up to the
    fork point (shared, not copied: service.log.streams), down the chain."""
    where: list[ColumnElement[bool]] = []
    current, upto = run_id, None
    while True:
        fork = (
            await conn.execute(
                select(run_forks.c.source_run_id, run_forks.c.fork_seq).where(
                    run_forks.c.run_id == current
                )
            )
        ).first()
        # The run's month names its events' partition: only that one is read.
        month = select(runs.c.run_month).where(runs.c.run_id == current).scalar_subquery()
        own = [events.c.run_id == current, events.c.run_month == month]
        if fork is not None:
            own.append(events.c.seq > fork.fork_seq)
        if upto is not None:
            own.append(events.c.seq <= upto)
        where.append(and_(*own))
        if fork is None:
            return where
        current, upto = fork.source_run_id, fork.fork_seq


async def read_events(
    conn: AsyncConnection, run_id: str, f: EventFilter, *, after: int = 0, limit: int = 1000
) -> list[Event]:
    segments = await _segments(conn, run_id)
    query = select(events.c.seq, events.c.type, events.c.chunk, events.c.received_at).where(
        segments[0] if len(segments) == 1 else or_(*segments), events.c.seq > after
    )
    if f.types:
        # Stored types went through `storable`; so do the ones asked for.
        query = query.where(events.c.type.in_([storable(t) for t in f.types]))
    patterns = f.patterns
    if patterns is not None and not patterns.everything:
        query = query.where(
            or_(
                events.c.type.in_(sorted(patterns.exact)),
                *(events.c.type.startswith(p, autoescape=True) for p in patterns.prefixes),
            )
        )
    if f.received_after is not None:
        query = query.where(events.c.received_at >= utc(f.received_after))
    if f.received_before is not None:
        query = query.where(events.c.received_at < utc(f.received_before))
    rows = await conn.execute(query.order_by(events.c.seq).limit(limit))
    return [Event(r.seq, r.type, r.chunk, r.received_at) for r in rows]
