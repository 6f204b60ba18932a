"""One run's events, filtered by type and receive time.

The scan is bounded by the primary key to one run (`run_id, seq > after`);
the filters apply within it. No extra index on `events`: every index there
is paid by every append, and one run's log is small next to the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from service.audit.filters import utc
from service.log import Event
from service.log.chunks import storable
from service.log.schema import events


@dataclass(frozen=True, slots=True)
class EventFilter:
    types: tuple[str, ...] = ()
    # Half-open, like run listings: received_after <= received_at < received_before.
    received_after: datetime | None = None
    received_before: datetime | None = None

    @property
    def empty(self) -> bool:
        return not self.types and self.received_after is None and self.received_before is None


async def read_events(
    conn: AsyncConnection, run_id: str, f: EventFilter, *, after: int = 0, limit: int = 1000
) -> list[Event]:
    query = select(events.c.seq, events.c.type, events.c.chunk, events.c.received_at).where(
        events.c.run_id == run_id, events.c.seq > after
    )
    if f.types:
        # Stored types went through `storable`; so do the ones asked for.
        query = query.where(events.c.type.in_([storable(t) for t in f.types]))
    if f.received_after is not None:
        query = query.where(events.c.received_at >= utc(f.received_after))
    if f.received_before is not None:
        query = query.where(events.c.received_at < utc(f.received_before))
    rows = await conn.execute(query.order_by(events.c.seq).limit(limit))
    return [Event(r.seq, r.type, r.chunk, r.received_at) for r in rows]
