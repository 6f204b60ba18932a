"""Exporting from the log: the runs' records, then their events page by page.

The records are read first and each run's events up to its recorded
`last_seq`: everything at or below a committed `last_seq` is committed and
immutable, so the file is a consistent snapshot even while runs append.

Each event line carries the run's chain hash through it, computed here from the chunk as
read (`agent_replay.chain`), a fork's events from its source included: the file's chain is
the run's own, seq 1 to `last_seq`. A run whose stored events no longer match the chain the
log stored with them as they were appended (`LogStore.verify_run`) is not exported
(`check_chains`): a chain rebuilt here over events altered in the database would vouch for
them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from agent_replay.archive.format import event_line, header_line
from agent_replay.chain import GENESIS, step
from agent_replay.errors import RunAltered, RunNotFound, ThreadNotFound, Unavailable
from agent_replay.log import AuditReads, Reads, check_run_id
from agent_replay.log.values import Event, RunRecord

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


async def check_chains(log: AuditReads, records: Sequence[RunRecord]) -> None:
    """Raise `RunAltered` for the first run whose stored events fail the log's own check of
    its chain (`LogStore.verify_run`), before the export's first byte (the HTTP export: a
    stream cut short is no 409). Each run is read twice: once here, once to export it."""
    for record in records:
        verdict = await log.verify_run(record.run_id)
        if verdict is not None and verdict.first_bad_seq is not None:
            raise RunAltered(record.run_id)


async def _pages(log: Reads, record: RunRecord) -> AsyncIterator[Sequence[Event]]:
    after = 0
    while after < record.last_seq:
        limit = min(PAGE, record.last_seq - after)
        events = await log.read_events(record.run_id, after, limit, through=record.last_seq)
        if not events or events[0].seq != after + 1:
            raise Unavailable(f"run {record.run_id!r} was deleted while it was exported")
        yield events
        after = events[-1].seq


async def export_lines(
    log: Reads,
    records: Sequence[RunRecord],
) -> AsyncIterator[bytes]:
    """The export file's lines. Each run's events are read up to its record's `last_seq`,
    through the log's reader: a replica may serve them, the primary completing what it
    has not replayed yet."""
    yield header_line(records)
    for record in records:
        head = GENESIS
        async for events in _pages(log, record):
            for event in events:
                head = step(head, event.seq, event.chunk)
                yield event_line(record.run_id, event.seq, event.received_at, head, event.chunk)


async def export_bytes(log: Reads, records: Sequence[RunRecord]) -> bytes:
    return b"".join([line async for line in export_lines(log, records)])
