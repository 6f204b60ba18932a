"""One run's events, filtered by type and receive time.

The scan is bounded by the primary key to one run (`run_id, seq > after`);
the filters apply within it. No extra index on `events`: every index there
is paid by every append, and one run's log is small next to the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select
from sqlalchemy.ext.asyncio import AsyncConnection

from service.audit.filters import utc
from service.log import Event
from service.log.chunks import storable
from service.log.schema import events
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


async def read_events(
    conn: AsyncConnection, run_id: str, f: EventFilter, *, after: int = 0, limit: int = 1000
) -> list[Event]:
    query = select(events.c.seq, events.c.type, events.c.chunk, events.c.received_at).where(
        events.c.run_id == run_id, events.c.seq > after
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
