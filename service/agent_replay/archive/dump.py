"""Exporting from the log: the runs' records, then their events page by page.

The records are read first and each run's events up to its recorded
`last_seq`: everything at or below a committed `last_seq` is committed and
immutable, so the file is a consistent snapshot even while runs append.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agent_replay.archive.format import event_line, header_line
from agent_replay.errors import RunNotFound, ThreadNotFound, Unavailable
from agent_replay.log import AuditReads, Reads, check_run_id
from agent_replay.log.values import RunRecord

PAGE = 5000


async def run_records(
    log: AuditReads, *, run_id: str | None = None, thread_id: str | None = None
) -> list[RunRecord]:
    """One run, or a thread's runs oldest first; raises when there are none."""
    if run_id is not None:
        record = await log.run_record(check_run_id(run_id))
        if record is None:
            raise RunNotFound(run_id)
        return [record]
    records = await log.thread_records(str(thread_id))
    if not records:
        raise ThreadNotFound(str(thread_id))
    return records


async def export_lines(log: Reads, records: Sequence[RunRecord]) -> AsyncIterator[bytes]:
    """The export file's lines. Each run's events are read up to its record's `last_seq`,
    through the log's reader: a replica may serve them, the primary completing what it
    has not replayed yet."""
    yield header_line(records)
    for record in records:
        after = 0
        while after < record.last_seq:
            limit = min(PAGE, record.last_seq - after)
            events = await log.read_events(record.run_id, after, limit, through=record.last_seq)
            if not events or events[0].seq != after + 1:
                raise Unavailable(f"run {record.run_id!r} was deleted while it was exported")
            for event in events:
                yield event_line(record.run_id, event.seq, event.received_at, event.chunk)
            after = events[-1].seq


async def export_bytes(log: Reads, records: Sequence[RunRecord]) -> bytes:
    return b"".join([line async for line in export_lines(log, records)])
