"""The offline commands' work (`agent-replay export|import|transcript|prune|verify|erase`),
given a database URL (or, for `verify FILE`, a file).

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

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agent_replay.archive.dump import check_chains, export_bytes, export_lines, run_records
from agent_replay.archive.reader import Archive, read_archive
from agent_replay.archive.signing import Signer, public_key
from agent_replay.archive.verify import FileVerdict, verify_file
from agent_replay.audit.integrity import verify_run, verify_thread
from agent_replay.errors import ExportNotSigned
from agent_replay.log import EventLog, LogStore
from agent_replay.log.expiry import SweepReport
from agent_replay.log.streams import StreamStore
from agent_replay.log.values import LoadReport, PruneReport, Tombstone, Verdict


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
    sign_key: Ed25519PrivateKey | None = None,
) -> int:
    """Write the export; to `out` via a temporary file, so a failure leaves no half file.

    `read_url`: a hot standby that serves the events (the primary fills in what it lacks).
    `sign_key`: end the file with its signature line (agent_replay.archive.signing).
    """
    async with log_for(url, read_url=read_url) as log:
        records = await run_records(log, run_id=run_id, thread_id=thread_id)
        await check_chains(log, records)  # an altered run is refused before any byte
        if out is None:
            async for line in _signed(export_lines(log, records), sign_key):
                sys.stdout.buffer.write(line)
            sys.stdout.buffer.flush()
            return sum(r.last_seq for r in records)
        partial = out.with_name(out.name + ".part")
        try:
            with partial.open("wb") as handle:
                async for line in _signed(export_lines(log, records), sign_key):
                    handle.write(line)
            os.replace(partial, out)
        finally:
            partial.unlink(missing_ok=True)
    return sum(r.last_seq for r in records)


async def _signed(
    lines: AsyncIterator[bytes], key: Ed25519PrivateKey | None
) -> AsyncIterator[bytes]:
    if key is None:
        async for line in lines:
            yield line
        return
    signer = Signer(key)
    async for line in lines:
        yield signer.update(line)
    yield signer.line()


def read_signed(data: bytes, key: Ed25519PublicKey | None) -> Archive:
    """`read_archive`, and with `key` the file must also be signed by it (`import
    --public-key`): nothing of a file that is not reaches the database."""
    archive = read_archive(data)
    if key is not None:
        verdict = verify_file(data, key)
        if verdict.status != "intact":
            raise ExportNotSigned(verdict.line or 1, str(verdict.reason))
    return archive


def verify_path(path: Path, public_key_path: Path | None) -> FileVerdict:
    """`agent-replay verify FILE [--public-key FILE]`: the key is read first (a bad key is
    the caller's mistake, not the file's); a file that cannot be read is unreadable."""
    key = None if public_key_path is None else public_key(public_key_path.read_bytes())
    try:
        data = path.read_bytes()
    except OSError as exc:
        return FileVerdict("unreadable", None, f"cannot read {path}: {exc.strerror or exc}")
    return verify_file(data, key)


async def verify_in(url: str, *, run_id: str | None, thread_id: str | None) -> list[Verdict]:
    """The run's verdict, or each of the thread's runs' (agent_replay.audit.integrity);
    RunNotFound or ThreadNotFound when there is none."""
    async with log_for(url) as log:
        if run_id is not None:
            return [await verify_run(log, run_id)]
        return await verify_thread(log, str(thread_id))


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
