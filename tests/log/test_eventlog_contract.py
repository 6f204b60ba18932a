"""`EventLog` (PostgreSQL) runs the `LogStore` contract suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_replay.log import EventLog, LogStore
from tests.log.contract import LogStoreContract

# Both layouts of `events` (agent_replay.log.rows): a row per event, and batch rows for
# every append of two chunks or more (so nearly every read starts or ends inside one).
LAYOUTS = [pytest.param(None, id="row-per-event"), pytest.param(2, id="batch-rows")]


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
