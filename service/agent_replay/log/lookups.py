"""The audit's and the archive's reads: run listings, export records, a run's
events filtered by type and receive time, and the cache of closed runs' projections.

They are the log's like every other read (`queries.sql`, the log's pool, its
reader of batch rows and forks, `agent_replay.log.reading`): the audit and the
archive ask `LogStore` for them and know nothing of tables. Reached through the
"audit and archive reads" of `LogStore`.

The run listing is the one statement composed here, from literal conditions with
only values as parameters: each filter a request names must reach the planner as
a condition of its own, so the index behind it (thread, status, agent, error code
with `created_at`; tools with the GIN index on `tool_names`) is used. One fixed
statement with "$n IS NULL OR ..." would, once PostgreSQL settles on a generic
plan, walk `created_at` for every listing, a rare thread's included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import asyncpg

from agent_replay.log import reading
from agent_replay.log.chunks import loads, storable
from agent_replay.log.faults import translated
from agent_replay.log.filters import EventFilter, RunFilter
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import RunRecord

_RUN_RECORD = QUERIES["run_record"]
_THREAD_RECORDS = QUERIES["thread_records"]
_CACHED = QUERIES["cached_projections"]
_STORE_PROJECTION = QUERIES["store_projection"]

_READ = "the event log cannot be read"

# -- run listings ---------------------------------------------------------------

# A run's row as `Run` holds it (the columns of `get_run` in queries.sql).
_LISTING = """SELECT run_id, thread_id, agent, status, last_seq, closed_at IS NOT NULL AS closed,
       created_at, updated_at, closed_at, metadata::text AS metadata, last_terminal,
       error_message, error_code, lease_owner, lease_expires_at, tool_names, prompt_tokens,
       completion_tokens, total_tokens, on_disconnect, grace_seconds, reader_left_at,
       redactions::text AS redactions
FROM runs"""


def listing(f: RunFilter, limit: int, after: tuple[datetime, str] | None) -> tuple[str, list[Any]]:
    """The listing's statement and its parameters: runs matching `f`, newest first
    (`created_at, run_id` descending), those before `after` only, at most `limit`."""
    where: list[str] = []
    args: list[Any] = []

    def value(v: Any) -> str:
        args.append(v)
        return f"${len(args)}"

    def one_of(column: str, values: tuple[str, ...]) -> None:
        if len(values) == 1:
            where.append(f"{column} = {value(values[0])}")
        elif values:
            where.append(f"{column} = ANY({value(list(values))}::text[])")

    if f.thread_id is not None:
        where.append(f"thread_id = {value(f.thread_id)}")
    one_of("status", f.statuses)
    if f.created_after is not None:
        where.append(f"created_at >= {value(f.created_after)}")
    if f.created_before is not None:
        where.append(f"created_at < {value(f.created_before)}")
    if f.agent is not None:
        where.append(f"agent = {value(f.agent)}")
    if f.tool is not None:
        where.append(f"tool_names @> {value([f.tool])}::text[]")
    if f.has_error is not None:
        where.append(f"error_message IS {'NOT ' if f.has_error else ''}NULL")
    one_of("error_code", f.error_codes)
    if f.redacted is not None:
        where.append(f"redactions IS {'NOT ' if f.redacted else ''}NULL")
    if after is not None:
        where.append(f"(created_at, run_id) < ({value(after[0])}, {value(after[1])})")
    condition = f" WHERE {' AND '.join(where)}" if where else ""
    order = f" ORDER BY created_at DESC, run_id DESC LIMIT {value(limit)}"
    return _LISTING + condition + order, args


async def list_runs(
    pool: asyncpg.Pool, f: RunFilter, limit: int, after: tuple[datetime, str] | None
) -> list[asyncpg.Record]:
    """The listing's rows, each as `get_run` reads a run (`Run.from_record` takes it)."""
    statement, args = listing(f, limit, after)
    with translated(_READ):
        return await pool.fetch(statement, *args)


# -- export records ---------------------------------------------------------------


def _record(row: asyncpg.Record) -> RunRecord:
    fields = dict(row)
    fields["metadata"] = loads(fields["metadata"])
    return RunRecord(**fields)


async def run_record(pool: asyncpg.Pool, run_id: str) -> RunRecord | None:
    with translated(_READ):
        row = await pool.fetchrow(_RUN_RECORD, run_id)
    return None if row is None else _record(row)


async def thread_records(pool: asyncpg.Pool, thread_id: str) -> list[RunRecord]:
    with translated(_READ):
        rows = await pool.fetch(_THREAD_RECORDS, storable(thread_id))
    return [_record(row) for row in rows]


# -- filtered events ----------------------------------------------------------------


def _like(text: str) -> str:
    """`text` as a LIKE pattern matching itself (LIKE's escape character is `\\`)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


async def read_filtered(
    pool: asyncpg.Pool,
    run_id: str,
    f: EventFilter,
    after: int,
    limit: int,
    *,
    citus: bool = False,
) -> list[tuple[int, str, str, datetime]]:
    """`(seq, type, chunk, received_at)` of run `run_id`'s events after `after` that pass
    `f` (a fork's prefix included), at most `limit`, in seq order (`reading.filtered`)."""
    types = sorted(set(f.types)) or None
    patterns = None
    if f.patterns is not None and not f.patterns.everything:
        patterns = sorted(_like(t) for t in f.patterns.exact)
        patterns += [_like(p) + "%" for p in f.patterns.prefixes]
    bounds = (f.received_after, f.received_before)
    return await reading.filtered(
        pool, run_id, after, limit, types, patterns, bounds, f.passes_type, citus=citus
    )


# -- the projection cache -------------------------------------------------------------


async def cached_projections(
    pool: asyncpg.Pool, last_seqs: Mapping[str, int], normalize: bool, version: str
) -> dict[str, str]:
    if not last_seqs:
        return {}
    with translated(_READ):
        rows = await pool.fetch(_CACHED, list(last_seqs), normalize, version)
    # A last_seq mismatch means the run was pruned and imported again.
    return {r[0]: r[2] for r in rows if last_seqs.get(r[0]) == r[1]}


async def store_projections(
    pool: asyncpg.Pool, made: Sequence[tuple[str, int, str]], normalize: bool, version: str
) -> None:
    """Cache `(run_id, last_seq, messages)` for each run (closed: its log never changes)."""
    args = [(run_id, normalize, last_seq, version, text) for run_id, last_seq, text in made]
    with translated("the projection cache cannot be written"):
        async with pool.acquire() as conn, conn.transaction():
            await conn.executemany(_STORE_PROJECTION, args)
