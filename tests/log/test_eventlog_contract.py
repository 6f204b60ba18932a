"""`EventLog` (PostgreSQL) runs the `LogStore` contract suite, in both row layouts."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from agent_replay import metrics
from agent_replay.config import asyncpg_dsn
from agent_replay.log import EventLog, LogStore, partitions
from tests.log.contract import LogStoreContract
from tests.support.pg import Databases

# Both layouts of `events` (agent_replay.log.rows): a row per event, and batch rows for
# every append of two chunks or more (so nearly every read starts or ends inside one).
LAYOUTS = [pytest.param(None, id="row-per-event"), pytest.param(2, id="batch-rows")]


@pytest.fixture(scope="module")
async def standby_url(databases: Databases) -> AsyncIterator[str]:
    """A database of its own standing in for a hot standby: it holds what `replay`
    copied to it, no more (a standby whose replay is paused between copies)."""
    url = await databases.clone()
    yield url
    await databases.drop(url)


class CopiedStandby:
    """`Lagging` for `EventLog`: a log reading catch-ups from `standby_url`, which has a
    run as the primary had it at its last `replay`."""

    def __init__(self, store: EventLog, primary: asyncpg.Pool, standby: asyncpg.Pool) -> None:
        self._store = store
        self._primary = primary
        self._standby = standby

    @property
    def store(self) -> LogStore:
        return self._store

    async def replay(self, run_id: str) -> None:
        run = await self._primary.fetch("SELECT * FROM runs WHERE run_id = $1", run_id)
        events = await self._primary.fetch("SELECT * FROM events WHERE run_id = $1", run_id)
        await partitions.ensure(self._standby, [row["run_month"] for row in run])
        async with self._standby.acquire() as conn, conn.transaction():
            await conn.execute("DELETE FROM events WHERE run_id = $1", run_id)
            await conn.execute("DELETE FROM runs WHERE run_id = $1", run_id)
            for table, rows in (("runs", run), ("events", events)):
                if rows:
                    await conn.copy_records_to_table(
                        table,
                        records=[tuple(r.values()) for r in rows],
                        columns=list(rows[0].keys()),
                    )

    def standby_reads(self) -> int:
        """The log's own count of catch-up reads the standby served, wholly or topped up."""
        samples = (
            metrics.REGISTRY.get_sample_value("replay_replica_reads_total", {"served": served})
            for served in ("standby", "topped_up")
        )
        return int(sum(value or 0 for value in samples))


class TestEventLog(LogStoreContract):
    @pytest.fixture(params=LAYOUTS)
    def batch_min(self, request: pytest.FixtureRequest) -> int | None:
        value: int | None = request.param
        return value

    @pytest.fixture
    async def store(self, database_url: str, batch_min: int | None) -> AsyncIterator[LogStore]:
        async with EventLog.connect(database_url, pool_size=4, batch_min=batch_min) as log:
            yield log

    @pytest.fixture
    async def second_store(
        self, database_url: str, batch_min: int | None
    ) -> AsyncIterator[LogStore]:
        # Another process's handle: its own pool, lanes and LISTEN connection.
        async with EventLog.connect(database_url, pool_size=4, batch_min=batch_min) as log:
            yield log

    @pytest.fixture
    async def lagging(
        self, database_url: str, standby_url: str, batch_min: int | None
    ) -> AsyncIterator[CopiedStandby]:
        async with (
            EventLog.connect(
                database_url, pool_size=4, batch_min=batch_min, read_url=standby_url
            ) as log,
            asyncpg.create_pool(asyncpg_dsn(database_url), min_size=1, max_size=2) as primary,
            asyncpg.create_pool(asyncpg_dsn(standby_url), min_size=1, max_size=2) as standby,
        ):
            yield CopiedStandby(log, primary, standby)
