"""`events`' monthly partitions: created ahead, dropped whole.

`events` is partitioned by range of `run_month`, its run's creation month
(UTC; `runs.run_month`, generated from `created_at`), one partition a month
named `events_YYYY_MM`. A run's events are all in its month's partition
however long it lives, so retention can drop a month whole once every run
created in it is closed and past retention.

There is no default partition, on purpose: DETACH PARTITION CONCURRENTLY is
refused while one exists, and creating a month's partition would first scan
the default for rows of that month under a lock appends wait on. Instead:

* `ensure_ahead` creates the current and next month's partitions; the log
  calls it when it opens and then every `AHEAD_SECONDS` (so the next month
  exists weeks before its first run), and `agent-replay migrate` made them too.
* An append whose run's month has no partition (a clock far ahead, a
  partition dropped by hand) fails with check_violation; the writer then
  creates its months (`ensure_for_runs`) and tries once more.
* An import creates the months of the runs it loads first (`ensure`).

Creating is idempotent and safe with several processes at once: each month
is created under a transaction-level advisory lock, after checking that it
is still missing; a new partition is made as a plain table and then
attached, which takes only SHARE UPDATE EXCLUSIVE on `events` (appends and
reads go on; CREATE TABLE ... PARTITION OF would take ACCESS EXCLUSIVE).
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime

import asyncpg

from agent_replay.log.sql import QUERIES
from agent_replay.tasks import stopped

log = logging.getLogger("replay.log")

# How often an open log makes sure the current and next month exist.
AHEAD_SECONDS = 3600.0

# Names of `events`' partitions; nothing else in the schema matches.
_NAME = re.compile(r"events_([0-9]{4})_([0-9]{2})")
# Any constant: the key of the advisory lock partition changes are made under.
_LOCK_KEY = 0x7265706C61790001

_LIST = QUERIES["event_partitions"]


def month_of(moment: datetime) -> date:
    """The UTC month `moment` falls in, as runs.run_month has it."""
    utc = moment.astimezone(UTC)
    return date(utc.year, utc.month, 1)


def next_month(month: date) -> date:
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


def name_of(month: date) -> str:
    return f"events_{month.year:04d}_{month.month:02d}"


def month_named(name: str) -> date | None:
    match = _NAME.fullmatch(name)
    return None if match is None else date(int(match[1]), int(match[2]), 1)


@dataclass(frozen=True, slots=True)
class Partition:
    month: date
    name: str
    # Left by an interrupted DETACH ... CONCURRENTLY: to be finalized.
    detaching: bool = False


Querier = asyncpg.Pool | asyncpg.Connection | asyncpg.pool.PoolConnectionProxy


async def partitions(conn: Querier) -> list[Partition]:
    """`events`' partitions, oldest month first."""
    found = []
    for row in await conn.fetch(_LIST):
        month = month_named(row["name"])
        if month is not None:
            found.append(Partition(month, row["name"], row["detaching"]))
    return sorted(found, key=lambda p: p.month)


async def ensure(pool: asyncpg.Pool, months: Iterable[date]) -> list[date]:
    """Create the partitions of `months` that are missing; returns those created."""
    wanted = sorted(set(months))
    if not wanted:
        return []
    existing = {p.month for p in await partitions(pool)}
    created = []
    for month in wanted:
        if month in existing:
            continue
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _LOCK_KEY)
            if month in {p.month for p in await partitions(conn)}:
                continue  # another process made it meanwhile
            name = name_of(month)
            # A table left by an interrupted prune's detach would be in the way.
            await conn.execute(f"DROP TABLE IF EXISTS {name}")
            # INCLUDING COMPRESSION: the chunk and type columns' (lz4 where the server has
            # it, revisions 0007_event_batches and 0008_type_compression); a partition
            # does not take it from its parent.
            await conn.execute(
                f"CREATE TABLE {name} (LIKE events INCLUDING DEFAULTS INCLUDING CONSTRAINTS"
                " INCLUDING COMPRESSION)"
            )
            # Attaching an empty table scans nothing and takes only SHARE UPDATE EXCLUSIVE.
            await conn.execute(f"ALTER TABLE events ATTACH PARTITION {name} {_bounds(month)}")
        created.append(month)
        log.info("events partition %s created", name_of(month))
    return created


async def ensure_ahead(pool: asyncpg.Pool, now: datetime | None = None) -> list[date]:
    """The current and next month's partitions, created if missing."""
    current = month_of(now or datetime.now(UTC))
    return await ensure(pool, [current, next_month(current)])


_RUN_MONTHS = QUERIES["run_months"]


async def ensure_for_runs(pool: asyncpg.Pool, run_ids: Sequence[str]) -> list[date]:
    """The partitions of these runs' months, created if missing (an append's fallback)."""
    months = [row["run_month"] for row in await pool.fetch(_RUN_MONTHS, list(run_ids))]
    return await ensure(pool, months)


def no_partition(error: BaseException) -> bool:
    """Whether `error` is PostgreSQL finding no partition of `events` for a row."""
    return isinstance(error, asyncpg.CheckViolationError) and "no partition" in str(error)


class Ahead:
    """Keeps the current and next month's partitions created while the log is open."""

    def __init__(self, pool: asyncpg.Pool, interval_seconds: float = AHEAD_SECONDS) -> None:
        self._pool = pool
        self._interval = interval_seconds
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="events-partitions")

    async def stop(self) -> None:
        await stopped(self._task)
        self._task = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            try:
                await ensure_ahead(self._pool)
            except (asyncpg.PostgresError, OSError) as error:
                # The next round (or an append's fallback) tries again.
                log.warning("events partitions not checked: %s", error)


_MONTH_HAS_RUNS = QUERIES["month_has_runs"]
_DETACHED = QUERIES["detached_partitions"]
# DETACH ... CONCURRENTLY waits for every transaction that may still see the
# partition (never blocking appends meanwhile): a long read delays it.
_DETACH_SECONDS = 600.0


def _bounds(month: date) -> str:
    return f"FOR VALUES FROM ('{month.isoformat()}') TO ('{next_month(month).isoformat()}')"


async def drop(pool: asyncpg.Pool, partition: Partition, *, citus: bool = False) -> bool:
    """Detach `partition` (CONCURRENTLY: appends and reads of other months go on)
    and drop it, once its runs are gone. False (attached again, nothing dropped)
    when a run of its month appeared meanwhile (an import of an old run).
    `citus`: Citus refuses DETACH ... CONCURRENTLY; a plain DETACH holds `events`
    (ACCESS EXCLUSIVE: appends and reads wait) while each node changes its catalog."""
    name = partition.name
    if partition.detaching:
        # An earlier detach was interrupted after its first transaction.
        await pool.execute(f"ALTER TABLE events DETACH PARTITION {name} FINALIZE")
    elif citus:
        await pool.execute(f"ALTER TABLE events DETACH PARTITION {name}", timeout=_DETACH_SECONDS)
    else:
        # Not in a transaction block: PostgreSQL refuses CONCURRENTLY in one.
        await pool.execute(
            f"ALTER TABLE events DETACH PARTITION {name} CONCURRENTLY", timeout=_DETACH_SECONDS
        )
    if await pool.fetchval(_MONTH_HAS_RUNS, partition.month):
        await pool.execute(f"ALTER TABLE events ATTACH PARTITION {name} {_bounds(partition.month)}")
        log.warning("events partition %s kept: a run of its month was stored meanwhile", name)
        return False
    await pool.execute(f"DROP TABLE {name}")
    log.info("events partition %s dropped", name)
    return True


async def drop_leftovers(pool: asyncpg.Pool, before: date) -> int:
    """Drop tables detached from `events` but not dropped (an interrupted prune) whose
    month is before `before` and has no runs; returns how many."""
    dropped = 0
    for row in await pool.fetch(_DETACHED):
        month = month_named(row["name"])
        if month is None or month >= before or await pool.fetchval(_MONTH_HAS_RUNS, month):
            continue
        await pool.execute(f"DROP TABLE IF EXISTS {row['name']}")
        dropped += 1
    return dropped
