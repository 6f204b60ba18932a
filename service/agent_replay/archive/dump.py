"""Exporting from the log: the runs' records, then their events page by page.

The records are read first and each run's events up to its recorded
`last_seq`: everything at or below a committed `last_seq` is committed and
immutable, so the file is a consistent snapshot even while runs append.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from agent_replay.archive.format import event_line, header_line
from agent_replay.audit.summary import RUN_COLUMNS
from agent_replay.errors import RunNotFound, ThreadNotFound, Unavailable
from agent_replay.log import Event, check_run_id
from agent_replay.log.chunks import loads
from agent_replay.log.rows import BATCH_MAX, events_of
from agent_replay.log.schema import events, run_forks, runs
from agent_replay.log.values import RunRecord

PAGE = 5000

_RECORD_COLUMNS = (*RUN_COLUMNS, runs.c.input)


async def run_records(
    engine: AsyncEngine, *, run_id: str | None = None, thread_id: str | None = None
) -> list[RunRecord]:
    """One run, or a thread's runs oldest first; raises when there are none."""
    query = select(*_RECORD_COLUMNS).order_by(runs.c.created_at, runs.c.run_id)
    if run_id is not None:
        query = query.where(runs.c.run_id == check_run_id(run_id))
    else:
        query = query.where(runs.c.thread_id == thread_id)
    async with engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    if not rows:
        raise RunNotFound(run_id) if run_id is not None else ThreadNotFound(str(thread_id))
    return [RunRecord(**{**row, "metadata": loads(row["metadata"])}) for row in rows]


async def export_lines(
    engine: AsyncEngine, records: Sequence[RunRecord], *, replica: AsyncEngine | None = None
) -> AsyncIterator[bytes]:
    """The export file's lines. `records` come from the primary (`engine`); with a
    `replica` (a hot standby) it serves the events, and whatever it has not
    replayed up to a record's `last_seq` is read from the primary."""
    yield header_line(records)
    for record in records:
        after = 0
        while after < record.last_seq:
            want = min(after + PAGE, record.last_seq)
            async with (replica or engine).connect() as conn:
                rows = await _page(conn, record.run_id, after, record.last_seq)
            if replica is not None and (rows[-1].seq if rows else after) < want:
                # What the standby has not replayed yet comes from the primary.
                end = rows[-1].seq if rows else after
                async with engine.connect() as conn:
                    more = await _page(conn, record.run_id, end, record.last_seq, PAGE - len(rows))
                rows = [*rows, *more]
            if not rows or rows[0].seq != after + 1:
                raise Unavailable(f"run {record.run_id!r} was deleted while it was exported")
            for row in rows:
                yield event_line(record.run_id, row.seq, row.received_at, row.chunk)
            after = rows[-1].seq


async def _page(
    conn: AsyncConnection, run_id: str, after: int, upto: int, limit: int = PAGE
) -> list[Event]:
    """Run `run_id`'s events after `after` up to `upto`; a fork's first ones are its
    source's (shared, not copied: see agent_replay.log.streams), read from there."""
    rows = (
        await conn.execute(
            select(events.c.seq, events.c.n, events.c.type, events.c.chunk, events.c.received_at)
            .where(events.c.run_id == run_id)
            # A batch row may hold seqs past `upto` (agent_replay.log.rows).
            .where(
                events.c.seq > after,
                events.c.seq < min(upto, after + limit) + BATCH_MAX,
                events.c.seq - events.c.n < min(upto, after + limit),
            )
            .order_by(events.c.seq)
            .limit(limit)
        )
    ).all()
    page = [Event(*event) for event in events_of(rows, after, upto, limit)]
    if page and page[0].seq == after + 1:
        return page
    fork = (
        await conn.execute(
            select(run_forks.c.source_run_id, run_forks.c.fork_seq).where(
                run_forks.c.run_id == run_id
            )
        )
    ).first()
    if fork is None or after >= fork.fork_seq:
        return page
    return await _page(conn, fork.source_run_id, after, min(upto, fork.fork_seq), limit)


async def export_bytes(engine: AsyncEngine, records: Sequence[RunRecord]) -> bytes:
    return b"".join([line async for line in export_lines(engine, records)])
