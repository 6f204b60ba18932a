"""The log's `LogStore` contract suite, run by `EventLog` through a Citus coordinator."""

from __future__ import annotations

import pytest

from agent_replay.errors import ErasureUnsupported
from agent_replay.log import LogStore
from tests.log.contract import chunk, new_run
from tests.log.test_eventlog_contract import TestEventLog as _OnPostgreSQL


class TestEventLogOnCitus(_OnPostgreSQL):
    """Every contract test, both row layouts, with `database_url` the coordinator's, but
    erasure's: on Citus it is refused (docs/scale-out.md, "What does not, and why")."""

    async def test_erase_thread_when_erased_then_tombstones_exact_and_runs_refused_after(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        thread = new_run("c-erase")
        run = new_run("c-erase-run")
        await store.create_run(run, thread_id=thread)
        await store.append(run, [chunk("A", n=i) for i in range(3)])
        before = await store.read_events(run, 0, 100)
        with pytest.raises(ErasureUnsupported):
            await store.erase_thread(thread, erased_by="key:test", reason="asked")
        # Refused whole: the run is still there, open, its events and chain intact, and
        # no tombstone was left.
        assert await second_store.read_events(run, 0, 100) == before
        found = await second_store.get_run(run)
        assert found is not None and not found.closed
        assert await second_store.tombstones(thread_id=thread) == []
        verdict = await second_store.verify_run(run)
        assert verdict is not None and verdict.ok
