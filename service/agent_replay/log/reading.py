"""A run's events, read: the log's one reader.

Every read of a run's events goes through here: the stream's pages (`Reader.page`),
event pages, exports and projections (`Reader.events`), the audit's filtered read
(`filtered`) and Durable Streams' reads (`chunks`, `json_messages`, `chunk_at`). So
no caller knows, and only this module minds:

* how events sit in rows: one a row, or a batch of them in one
  (`agent_replay.log.rows`), cut here to the range asked for;
* forks: a fork's first events are its source's up to the fork point (shared, not
  copied: `run_forks`), read through the chain of sources, each segment cut by its
  bounds (`stream_read` in queries.sql);
* a hot standby (`Reader`): trusted only as far as it goes, what it lacks read from
  the primary in the same call, so a reader never skips nor waits for it;
* Citus (`citus=True`, agent_replay.log.citus): the fork chain's statements are
  recursive CTEs over runs of several shards, which Citus refuses; a read reaches
  for them only when the run is a fork (`citus_is_fork`), so a run that is none
  reads as on PostgreSQL, and a fork's prefix is not readable there.

Events come out as `(seq, type, chunk, received_at)` (`agent_replay.log.Event`'s
fields) or `(seq, chunk)` (a `Row`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from operator import itemgetter
from typing import Any, TypeVar

import asyncpg

from agent_replay import metrics
from agent_replay.errors import Unavailable
from agent_replay.log.faults import acquire, translated
from agent_replay.log.integrity import ChainCheck
from agent_replay.log.rows import chunks_of, events_of, hashed_of
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import Page, Row, RunState, Verdict

_READ_EVENTS = QUERIES["read_events"]
_READ_PAGE = QUERIES["read_page"]
# A fork's prefix is its source's: read through the chain only when a plain read does
# not start right after the cursor.
_READ_EVENTS_STITCHED = QUERIES["read_events_stitched"]
_READ_STITCHED = QUERIES["stream_read"]
_READ_OWN = QUERIES["stream_read_own"]
_READ_ONE = QUERIES["stream_read_one"]
_READ_OWN_JSON = QUERIES["stream_read_own_json"]
_READ_JSON = QUERIES["stream_read_json"]
_READ_FILTERED = QUERIES["read_events_filtered"]
_CHAIN_STATE = QUERIES["chain_state"]
_READ_CHAINED = QUERIES["read_chained"]
# Rows per page of a verification's read.
_CHAINED_ROWS = 500
_IS_FORK = QUERIES["citus_is_fork"]
_READ_FILTERED_OWN = QUERIES["citus_read_events_filtered"]
_READ_CHAINED_OWN = QUERIES["citus_read_chained"]

_READ = "the event log cannot be read"

_log = logging.getLogger("replay.log")
_T = TypeVar("_T")

# (seq, type, chunk, received_at): an event as stored.
EventRow = tuple[int, str, str, datetime]

# read_page's row: (last_seq, closed, seq, n, chunk).
_ROW_N = itemgetter(3)
_ROW_CHUNK = itemgetter(2, 4)


class Reader:
    """Reads of a run's events from the primary's pool, or a standby's where one may serve."""

    def __init__(
        self, pool: asyncpg.Pool, standby: asyncpg.Pool | None = None, *, citus: bool = False
    ) -> None:
        self.pool = pool
        self.standby = standby
        self.citus = citus

    async def events(
        self, run_id: str, after: int, limit: int, *, through: int | None = None
    ) -> list[EventRow]:
        """Events with seq > `after`, at most `limit`, in seq order.

        `through`: the run's `last_seq` as the primary last reported it. With it
        (and a standby) the standby serves the page, and whatever it has not
        replayed yet up to `through` is read from the primary.
        """
        citus = self.citus
        if through is None or self.standby is None:
            return await _events(self.pool, run_id, after, limit, citus)
        want = min(after + limit, through)
        rows = await self._from_standby(_events, run_id, after, limit, citus)
        if rows is None:
            return await _events(self.pool, run_id, after, limit, citus)
        end = rows[-1][0] if rows else after
        if end >= want or len(rows) == limit:
            metrics.REPLICA_READS.labels("standby").inc()
            return rows
        metrics.REPLICA_READS.labels("topped_up").inc()
        return rows + await _events(self.pool, run_id, end, limit - len(rows), citus)

    async def page(
        self, run_id: str, after: int, limit: int, *, catch_up: bool = False
    ) -> Page | None:
        """Events with seq > `after` (at most `limit`) and the run's state; None if no such run.

        `catch_up=True` lets a standby serve it. A standby is behind the primary
        by its replay lag (or without limit, when replay is paused), so its
        page is trusted only as far as it goes: a full page, or a run it
        already has closed and whole. Anything shorter is completed from the
        primary, in the same call. The state returned is then the primary's.
        """
        citus = self.citus
        if not catch_up or self.standby is None:
            return await _page(self.pool, run_id, after, limit, citus)
        page = await self._from_standby(_page, run_id, after, limit, citus)
        if page is None:
            # Not on the standby yet (a new run), or the standby failed.
            return await _page(self.pool, run_id, after, limit, citus)
        if len(page.rows) == limit or page.complete:
            metrics.REPLICA_READS.labels("standby").inc()
            return page
        end = page.rows[-1][0] if page.rows else after
        rest = await _page(self.pool, run_id, end, limit - len(page.rows), citus)
        metrics.REPLICA_READS.labels("topped_up").inc()
        if rest is None:
            return None  # pruned on the primary meanwhile
        return Page(rest.state, page.rows + rest.rows)

    async def from_standby(self, read: Callable[..., Awaitable[_T]], *args: Any) -> _T | None:
        """`read(pool, *args)` on the standby if there is one and it answers, else on the
        primary: for reads that may lag (a run listing), which nothing tops up."""
        if self.standby is not None:
            result = await self._from_standby(read, *args)
            if result is not None:
                return result
        return await read(self.pool, *args)

    async def _from_standby(self, read: Callable[..., Awaitable[_T]], *args: Any) -> _T | None:
        """`read(standby, *args)`; None (counted) if the standby cannot answer."""
        assert self.standby is not None
        try:
            result = await read(self.standby, *args)
        except Unavailable as exc:
            metrics.REPLICA_READS.labels("primary").inc()
            _log.warning("standby read failed, reading the primary: %s", exc)
            return None
        if result is None:
            metrics.REPLICA_READS.labels("primary").inc()
        return result


async def _forked(pool: asyncpg.Pool, run_id: str, citus: bool) -> bool:
    """Whether a gap after a cursor may be a fork's prefix, to read through its chain:
    always on PostgreSQL (the chain's statement answers both), on Citus only for a fork."""
    return not citus or bool(await pool.fetchval(_IS_FORK, run_id))


async def _events(
    pool: asyncpg.Pool, run_id: str, after: int, limit: int, citus: bool = False
) -> list[EventRow]:
    with translated(_READ):
        rows = await pool.fetch(_READ_EVENTS, run_id, after, limit)
        # The first row holding `after + 1` starts at or before it; anything else is a
        # gap: a fork's inherited prefix, or nothing there.
        if (not rows or rows[0]["seq"] - rows[0]["n"] > after) and await _forked(
            pool, run_id, citus
        ):
            rows = await pool.fetch(_READ_EVENTS_STITCHED, run_id, after, limit)
    return events_of(rows, after, limit=limit)


async def _page(
    pool: asyncpg.Pool, run_id: str, after: int, limit: int, citus: bool = False
) -> Page | None:
    with translated(_READ):
        async with acquire(pool) as conn:
            records = await conn.fetch(_READ_PAGE, run_id, after, limit)
    if not records:
        return None
    first = records[0]
    state = RunState(first[0], first[1])
    if (
        (first[2] is None and after < state.last_seq)
        or (first[2] is not None and first[2] - first[3] > after)
    ) and await _forked(pool, run_id, citus):
        # A gap right after the cursor: a fork's inherited prefix (its own
        # events start after the fork point), read from its source.
        with translated(_READ):
            rows = await pool.fetch(_READ_STITCHED, run_id, after, state.last_seq, limit)
        return Page(state, chunks_of(rows, after, limit=limit))
    if first[2] is None:
        return Page(state, [])
    if len(records) <= limit and sum(map(_ROW_N, records)) == len(records):
        return Page(state, list(map(_ROW_CHUNK, records)))  # a row per event (in C)
    return Page(state, chunks_of([r[2:] for r in records], after, limit=limit))


async def chunks(
    pool: asyncpg.Pool, run_id: str, after: int, upto: int, limit: int, *, forked: bool
) -> list[Row]:
    """Events after `after` up to `upto`, at most `limit`; `forked`: the run is a fork,
    its prefix read from its source chain."""
    statement = _READ_STITCHED if forked else _READ_OWN
    with translated(_READ):
        async with pool.acquire() as conn:
            rows = await conn.fetch(statement, run_id, after, upto, limit)
    return chunks_of(rows, after, upto, limit)


async def chunks_on(
    conn: asyncpg.pool.PoolConnectionProxy, run_id: str, after: int, upto: int, limit: int
) -> list[Row]:
    """`chunks` of a run that may be a fork, on a connection the caller holds (inside
    its transaction: erasure folds a run's chain in the transaction that erases it)."""
    rows = await conn.fetch(_READ_STITCHED, run_id, after, upto, limit)
    return chunks_of(rows, after, upto, limit)


async def json_messages(
    pool: asyncpg.Pool,
    run_id: str,
    after: int,
    upto: int,
    limit: int,
    max_bytes: int,
    *,
    forked: bool,
) -> tuple[int, int, str]:
    """A JSON stream's messages after `after` as (count, last seq, "m1,m2,..."), joined
    by PostgreSQL: at most `limit` messages and about `max_bytes` (never fewer than one)."""
    statement = _READ_JSON if forked else _READ_OWN_JSON
    # The statement takes at most `limit` rows, and a batch row holds many
    # messages: bound the seqs instead (a run's seqs are contiguous, a fork's
    # prefix included, so `limit` seqs are at most `limit` messages).
    upto = min(upto, after + limit)
    with translated(_READ):
        row = await pool.fetchrow(statement, run_id, after, upto, limit, max_bytes)
    assert row is not None
    count = int(row["n"])
    return count, int(row["last"]) if count else after, str(row["body"])


async def chunk_at(pool: asyncpg.Pool, run_id: str, seq: int) -> str | None:
    """The chunk at `seq` (through the fork chain), or None."""
    with translated(_READ):
        row = await pool.fetchrow(_READ_ONE, run_id, seq - 1, seq)
    found = [] if row is None else chunks_of([row], seq - 1, seq)
    return found[0][1] if found else None


async def filtered(
    pool: asyncpg.Pool,
    run_id: str,
    after: int,
    limit: int,
    types: list[str] | None,
    patterns: list[str] | None,
    received: tuple[datetime | None, datetime | None],
    wanted: Callable[[str], bool],
    *,
    citus: bool = False,
) -> list[EventRow]:
    """Events after `after` (through the fork chain) of rows passing the filters of
    `read_events_filtered` (`types`, LIKE `patterns`, `received` bounds), of which a
    batch row's are kept if `wanted(type)`; at most `limit`, in seq order. A filter may
    skip any number of events: rows are read `limit` at a time, however many events
    each holds, until `limit` events pass."""
    found: list[EventRow] = []
    start = after
    statement = _READ_FILTERED
    if citus:
        with translated(_READ):
            if not await _forked(pool, run_id, citus):
                statement = _READ_FILTERED_OWN
    while len(found) < limit:
        with translated(_READ):
            rows = await pool.fetch(statement, run_id, start, limit, types, patterns, *received)
        found += [e for e in events_of(rows, start) if wanted(e[1])]
        if len(rows) < limit:
            break
        # A page of rows whose events the filter thinned: read on after it (within its
        # segment: a source's batch row may hold seqs past the fork point).
        start = min(rows[-1]["seq"], rows[-1]["hi"])
    return found[:limit]


async def chained_rows(
    conn: Any, run_id: str, after: int, limit: int, *, own: bool = False
) -> list[asyncpg.Record]:
    """Run `run_id`'s rows holding events after `after` (at most `limit`), with their
    hashes and owners, its fork prefix included (`read_chained`), on `conn`. `own`: the
    run is known to be no fork (on Citus, which refuses the fork chain's statement)."""
    statement = _READ_CHAINED_OWN if own else _READ_CHAINED
    with translated(_READ):
        rows: list[asyncpg.Record] = await conn.fetch(statement, run_id, after, limit)
    return rows


async def hash_at(conn: Any, run_id: str, seq: int) -> bytes | None:
    """The stored hash of run `run_id`'s event `seq` (through its fork chain), on
    `conn`; None if it has none (not chained yet) or there is no such event."""
    rows = await chained_rows(conn, run_id, seq - 1, 1)
    found = [stored for at, _, stored in hashed_of(rows, seq - 1) if at == seq]
    return found[0] if found else None


async def verify(pool: asyncpg.Pool, run_id: str, *, citus: bool = False) -> Verdict | None:
    """Run `run_id`'s chain checked against its stored events (agent_replay.log.integrity);
    None if there is no such run. Read from one snapshot (a repeatable-read transaction
    on the primary): appends committing meanwhile are not half seen."""
    with translated(_READ):
        async with (
            acquire(pool) as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            state = await conn.fetchrow(_CHAIN_STATE, run_id)
            if state is None:
                return None
            head = None if state["chain_head"] is None else bytes(state["chain_head"])
            check = ChainCheck(run_id, int(state["last_seq"]), head)
            # On Citus a run that is no fork is read without the fork chain (`_forked`).
            own = citus and not bool(await conn.fetchval(_IS_FORK, run_id))
            after = 0
            while not check.done:
                rows = await chained_rows(conn, run_id, after, _CHAINED_ROWS, own=own)
                for seq, chunk, stored in hashed_of(rows, after):
                    if not check.feed(seq, chunk, stored):
                        break
                    after = seq
                if len(rows) < _CHAINED_ROWS:
                    break
    return check.verdict()
