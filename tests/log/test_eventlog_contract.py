"""`EventLog` (PostgreSQL) runs the `LogStore` contract suite."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from service.log import EventLog, LogStore
from tests.log.contract import LogStoreContract


class TestEventLog(LogStoreContract):
    @pytest.fixture
    async def store(self, database_url: str) -> AsyncIterator[LogStore]:
        async with EventLog.connect(database_url, pool_size=4) as log:
            yield log

    @pytest.fixture
    async def second_store(self, database_url: str) -> AsyncIterator[LogStore]:
        # Another process's handle: its own pool, lanes and LISTEN connection.
        async with EventLog.connect(database_url, pool_size=4) as log:
            yield log
