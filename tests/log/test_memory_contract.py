"""`MemoryStore` (plain Python structures) runs the `LogStore` contract suite: the second,
independent implementation, which shows whether the suite says all a store must do."""

from __future__ import annotations

import pytest

from agent_replay.log import LogStore
from agent_replay.log.memory import MemoryLog, MemoryStore
from tests.log.contract import LogStoreContract


class StandbyCopy:
    """`Lagging` for `MemoryStore`: its standby is another `MemoryLog`, replayed by hand."""

    def __init__(self) -> None:
        self._standby = MemoryLog()
        self._store = MemoryStore(standby=self._standby)

    @property
    def store(self) -> LogStore:
        return self._store

    async def replay(self, run_id: str) -> None:
        self._standby.replay(self._store.log, run_id)

    def standby_reads(self) -> int:
        return self._store.standby_reads


class TestMemoryStore(LogStoreContract):
    @pytest.fixture
    def log(self) -> MemoryLog:
        return MemoryLog()

    @pytest.fixture
    def store(self, log: MemoryLog) -> LogStore:
        return MemoryStore(log)

    @pytest.fixture
    def second_store(self, log: MemoryLog) -> LogStore:
        # Another process's handle on the same log: its own hooks and listeners.
        return MemoryStore(log)

    @pytest.fixture
    def lagging(self) -> StandbyCopy:
        return StandbyCopy()
