"""Bulk load of whole runs (an import): all or nothing, idempotent.

A run already stored is compared field by field and event by event with
what is loaded: identical means nothing to do, anything else is a conflict
that rolls back the whole load. New runs are inserted with their events
(COPY) in the same transaction, their maintained columns (tool names, token
usage, last terminal) computed from the events just as appends keep them.
Locks are taken in run_id order, like the append statement's, so a load and
a group commit never deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from agent_replay.chain import GENESIS, step
from agent_replay.errors import RunConflict
from agent_replay.log import partitions
from agent_replay.log import rows as log_rows
from agent_replay.log.chunks import dumps, loads
from agent_replay.log.citus import Sharded
from agent_replay.log.faults import translated
from agent_replay.log.partitions import month_of
from agent_replay.log.sql import QUERIES
from agent_replay.log.summary import summarize
from agent_replay.log.values import LoadedRun, LoadReport, LoggedEvent, RunRecord

# The fields a stored run must match to count as the same run. updated_at is
# left out: leases renew it without changing what the run is.
_COMPARED = ("thread_id", "agent", "status", "created_at", "closed_at", "last_seq",
             "error_message", "error_code", "metadata", "input")  # fmt: skip

_LOCK = QUERIES["lock_runs"]
_EVENTS = QUERIES["run_chunks"]
_INSERT_RUN = QUERIES["insert_run"]

# An import keeps a row per event (agent_replay.log.rows): each has its own receive time.
_EVENT_COLUMNS = [
    "run_id", "seq", "type", "chunk", "message_id", "tool_call_id", "received_at", "run_month",
    "hashes",
]  # fmt: skip


def maintained_columns(
    events: Sequence[LoggedEvent],
) -> tuple[str | None, list[str], list[int | None]]:
    """(last terminal type, tool names, usage sums) as the append path keeps them."""
    summary = summarize(event.chunk for event in events)
    return summary.terminal, summary.tools, summary.usage


def _difference(stored: asyncpg.Record, record: RunRecord) -> str | None:
    for name in _COMPARED:
        mine = getattr(record, name)
        theirs = stored[name]
        if name == "metadata":
            theirs = loads(theirs)
        if mine != theirs:
            return name
    return None


async def _check_same(
    conn: asyncpg.pool.PoolConnectionProxy, stored: asyncpg.Record, run: LoadedRun
) -> None:
    run_id = run.record.run_id
    field_name = _difference(stored, run.record)
    if field_name is not None:
        raise RunConflict(
            f"run {run_id!r} is already stored with a different {field_name}; nothing was imported"
        )
    rows = log_rows.events_of(await conn.fetch(_EVENTS, run_id), 0)
    for seq, (row, event) in enumerate(zip(rows, run.events, strict=False), start=1):
        _, _, chunk, received_at = row
        if chunk != event.chunk.text or received_at != event.received_at:
            raise RunConflict(
                f"run {run_id!r} is already stored with different events (from seq {seq}); "
                "nothing was imported"
            )
    if len(rows) != len(run.events):
        raise RunConflict(
            f"run {run_id!r} is already stored with {len(rows)} events, the file has "
            f"{len(run.events)}; nothing was imported"
        )


def chained(run: LoadedRun) -> tuple[list[bytes], bytes]:
    """Each event's hash and the run's head (agent_replay.chain), as the append would
    have chained the run's events."""
    hashes: list[bytes] = []
    head = GENESIS
    for seq, event in enumerate(run.events, start=1):
        head = step(head, seq, event.chunk.text)
        hashes.append(head)
    return hashes, head


async def _insert(conn: asyncpg.pool.PoolConnectionProxy, run: LoadedRun) -> None:
    r = run.record
    terminal, tools, usage = maintained_columns(run.events)
    hashes, head = chained(run)
    with translated("the import failed", refused=f"run {r.run_id!r} cannot be stored"):
        created = await conn.fetchval(
            _INSERT_RUN,
            r.run_id, r.thread_id, r.agent, r.status, r.created_at, r.updated_at, r.closed_at,
            r.last_seq, r.error_message, dumps(r.metadata), r.input, terminal, tools, *usage,
            r.error_code, head, dumps(dict(run.redactions)) if run.redactions else None,
        )  # fmt: skip
    if created is None:
        raise RunConflict(f"run {r.run_id!r} was created while importing; import again")
    month = created  # the run's month: its events' partition key
    await conn.copy_records_to_table(
        "events",
        columns=_EVENT_COLUMNS,
        records=(
            (
                r.run_id,
                seq,
                e.chunk.type,
                e.chunk.text,
                e.chunk.message_id,
                e.chunk.tool_call_id,
                e.received_at,
                month,
                hashes[seq - 1],
            )
            for seq, e in enumerate(run.events, start=1)
        ),
    )


async def load_runs(
    pool: asyncpg.Pool, runs: Sequence[LoadedRun], *, sharded: Sharded | None = None
) -> LoadReport:
    """Store `runs` in one transaction; raises RunConflict (nothing stored)
    if any is already stored differently."""
    report = LoadReport()
    by_id = {run.record.run_id: run for run in runs}
    with translated("the import failed"):
        # Their months' partitions first, each in its own short transaction (never
        # under the load's locks): an export can hold runs of any age.
        await partitions.ensure(pool, {month_of(run.record.created_at) for run in runs})
        await _load(pool, by_id, report, sharded)
    return report


async def _load(
    pool: asyncpg.Pool,
    by_id: dict[str, LoadedRun],
    report: LoadReport,
    sharded: Sharded | None,
) -> None:
    async with pool.acquire() as conn, conn.transaction():
        # On Citus (`sharded`) a statement a shard: Citus locks rows on one only. The
        # load then writes on several workers, committed in two phases (an import is
        # no hot path).
        parts = (
            [sorted(by_id)]
            if sharded is None
            else [sorted(part) for part in await sharded.split(conn, dict.fromkeys(sorted(by_id)))]
        )
        stored = {row["run_id"]: row for part in parts for row in await conn.fetch(_LOCK, part)}
        for run_id in sorted(by_id):
            run = by_id[run_id]
            if run_id in stored:
                await _check_same(conn, stored[run_id], run)
                report.unchanged.append(run_id)
            else:
                await _insert(conn, run)
                report.created.append(run_id)
