"""The offline commands' work (`agent-replay export|import|transcript|prune|erase`), given a
database URL.

agent_replay.cli parses arguments and picks the database; this module does the
rest, so tests can drive the same functions the command line runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from agent_replay.archive.dump import export_bytes, export_lines, run_records
from agent_replay.archive.reader import Archive, read_archive
from agent_replay.log import EventLog, LogStore
from agent_replay.log.expiry import SweepReport
from agent_replay.log.streams import StreamStore
from agent_replay.log.values import LoadReport, PruneReport, Tombstone


@asynccontextmanager
async def log_for(url: str, *, read_url: str | None = None) -> AsyncIterator[LogStore]:
    """The log of a command: a connection or two (`read_url`: a hot standby for its reads)."""
    async with EventLog.connect(url, pool_size=2, commit_lanes=1, read_url=read_url) as log:
        yield log


async def export_to(
    url: str,
    *,
    run_id: str | None,
    thread_id: str | None,
    out: Path | None,
    read_url: str | None = None,
) -> int:
    """Write the export; to `out` via a temporary file, so a failure leaves no half file.

    `read_url`: a hot standby that serves the events (the primary fills in what it lacks).
    """
    async with log_for(url, read_url=read_url) as log:
        records = await run_records(log, run_id=run_id, thread_id=thread_id)
        if out is None:
            async for line in export_lines(log, records):
                sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            return sum(r.last_seq for r in records)
        partial = out.with_name(out.name + ".part")
        try:
            with partial.open("wb") as handle:
                async for line in export_lines(log, records):
                    handle.write(line)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    return sum(r.last_seq for r in records)


async def import_archive(url: str, archive: Archive) -> LoadReport:
    """Load an archive (validated whole by read_archive) in one transaction."""
    async with log_for(url) as log:
        return await log.load_runs(archive.runs)


async def archive_from_database(url: str, *, run_id: str | None, thread_id: str | None) -> Archive:
    """What `export` would write, read back: transcripts from a database take
    the same path as transcripts from a file."""
    async with log_for(url) as log:
        records = await run_records(log, run_id=run_id, thread_id=thread_id)
        return read_archive(await export_bytes(log, records))


async def prune_closed(
    url: str,
    closed_before: datetime,
    *,
    dry_run: bool,
    batch_events: int,
    max_rate: float | None = None,
    whole_months: bool = True,
) -> PruneReport:
    async with log_for(url) as log:
        if dry_run:
            return await log.count_prunable(closed_before)
        return await log.prune(
            closed_before, batch_events=batch_events, max_rate=max_rate, whole_months=whole_months
        )


async def erase_thread(
    url: str, thread_id: str, *, erased_by: str, reason: str | None
) -> list[Tombstone]:
    """Every run of the thread erased, its tombstones answered (`LogStore.erase_thread`)."""
    async with log_for(url) as log:
        return await log.erase_thread(thread_id, erased_by=erased_by, reason=reason)


async def sweep_expired_streams(
    url: str, *, dry_run: bool, batch_events: int, max_rate: float | None = None
) -> SweepReport:
    """Durable Streams past their TTL or expiry, deleted with their runs (each whole)."""
    async with EventLog.connect(url, pool_size=2, commit_lanes=1) as log:
        store = StreamStore(log)
        if dry_run:
            return await store.count_sweepable()
        return await store.sweep_expired(batch_events=batch_events, max_rate=max_rate)
