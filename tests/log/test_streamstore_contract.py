"""`StreamStore` (PostgreSQL) runs the `StreamStore` contract suite, and what only a
real database can show: a sweep that fails part way leaves every stream whole."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from agent_replay.log import EventLog
from agent_replay.log.streams import Producer, StreamStore, run_id_for
from tests.log.stream_contract import (
    Age,
    StreamStoreContract,
    append,
    messages,
    new_name,
    spec,
)
from tests.log.test_eventlog_contract import LAYOUTS


class TestStreamStore(StreamStoreContract):
    @pytest.fixture(params=LAYOUTS)
    def batch_min(self, request: pytest.FixtureRequest) -> int | None:
        value: int | None = request.param
        return value

    @pytest.fixture
    async def streams(self, database_url: str, batch_min: int | None) -> AsyncIterator[StreamStore]:
        async with EventLog.connect(database_url, pool_size=4, batch_min=batch_min) as log:
            yield StreamStore(log)

    @pytest.fixture
    async def second_streams(
        self, database_url: str, batch_min: int | None
    ) -> AsyncIterator[StreamStore]:
        # Another process's handle: its own pool, lanes and LISTEN connection.
        async with EventLog.connect(database_url, pool_size=4, batch_min=batch_min) as log:
            yield StreamStore(log)

    @pytest.fixture
    async def age(self, database_url: str) -> AsyncIterator[Age]:
        conn = await asyncpg.connect(database_url)

        async def age(name: str, seconds: float) -> None:
            # Time passes for this stream alone: its last touch and its deadline move back.
            status = await conn.execute(
                "UPDATE streams SET touched_at = touched_at - $2 * interval '1 second', "
                "expires_at = expires_at - $2 * interval '1 second' WHERE name = $1",
                name,
                seconds,
            )
            assert status == "UPDATE 1", (name, status)

        yield age
        await conn.close()


async def _rows(conn: asyncpg.Connection, run_id: str) -> tuple[object, ...]:
    """The rows the log keeps beside one stream's events."""
    return (
        await conn.fetchval("SELECT last_seq FROM runs WHERE run_id = $1", run_id),
        await conn.fetchval("SELECT count(*) FROM streams WHERE run_id = $1", run_id),
        await conn.fetchval("SELECT count(*) FROM stream_producers WHERE run_id = $1", run_id),
    )


async def test_sweep_when_one_stream_fails_to_delete_then_it_stays_whole_and_others_go(
    database_url: str,
) -> None:
    async with EventLog.connect(database_url, pool_size=4) as log:
        store = StreamStore(log)
        names = [new_name("fail-sweep") for _ in range(6)]
        poison = names[2]
        for i, name in enumerate(names):
            await store.create(spec(name, ttl_seconds=5), messages(1, 10 + i))
            await append(store, name, messages(50, 1), producer=Producer("p", 0, 0))
        poison_run = run_id_for(poison)
        before_events = [e.chunk for e in await log.read_events(poison_run, 0, 1000)]
        conn = await asyncpg.connect(database_url)
        try:
            before_rows = await _rows(conn, poison_run)
            # A failure inside the sweep's transaction, at one stream's last delete
            # (its stream row goes after its events and producers, in one statement).
            await conn.execute(
                "CREATE FUNCTION refuse_sweep() RETURNS trigger LANGUAGE plpgsql AS $$"
                " BEGIN RAISE EXCEPTION 'refused for the test'; END $$"
            )
            await conn.execute(
                "CREATE TRIGGER refuse_sweep BEFORE DELETE ON streams FOR EACH ROW"
                f" WHEN (OLD.name = '{poison}') EXECUTE FUNCTION refuse_sweep()"
            )
            await conn.execute(
                "UPDATE streams SET touched_at = touched_at - interval '6 seconds'"
                " WHERE name LIKE 'fail-sweep/%'"
            )
            report = await store.sweep_expired(batch_events=1_000)
            assert report.failed == 1
            for name in names:
                left = await conn.fetchval(
                    "SELECT count(*) FROM runs WHERE run_id = $1", run_id_for(name)
                )
                assert left == (1 if name == poison else 0), name
                if name != poison:
                    assert await log.read_events(run_id_for(name), 0, 1000) == []
            # The one that failed is whole: its rows and every event, read through the log.
            assert await _rows(conn, poison_run) == before_rows
            after_events = [e.chunk for e in await log.read_events(poison_run, 0, 1000)]
            assert after_events == before_events and len(before_events) == 13
            # Once the fault is gone, the next sweep takes it.
            await conn.execute("DROP TRIGGER refuse_sweep ON streams")
            again = await store.sweep_expired()
            assert again.failed == 0
            assert (
                await conn.fetchval("SELECT count(*) FROM runs WHERE run_id = $1", poison_run) == 0
            )
        finally:
            await conn.execute("DROP TRIGGER IF EXISTS refuse_sweep ON streams")
            await conn.execute("DROP FUNCTION IF EXISTS refuse_sweep()")
            await conn.close()
