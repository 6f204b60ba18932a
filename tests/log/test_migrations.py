"""Migrations are the only schema builder: they must agree with the models and reverse cleanly."""

from __future__ import annotations

import asyncio
import json
from datetime import date

import asyncpg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from agent_replay import migrate
from agent_replay.config import sqlalchemy_url
from agent_replay.log import EventLog, partitions
from agent_replay.log.schema import include_object, metadata
from tests.support.pg import Databases


async def _diff(url: str) -> list[object]:
    engine = create_async_engine(sqlalchemy_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: compare_metadata(
                    MigrationContext.configure(sync, opts={"include_object": include_object}),
                    metadata,
                )
            )
    finally:
        await engine.dispose()


async def _tables(url: str) -> set[str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return {r["tablename"] for r in rows}
    finally:
        await conn.close()


async def test_migrations_when_at_head_then_models_agree(databases: Databases) -> None:
    url = await databases.clone()
    try:
        assert await _diff(url) == []
    finally:
        await databases.drop(url)


async def test_migrations_upgrade_downgrade_upgrade_then_schema_back_at_head(
    databases: Databases,
) -> None:
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        assert {"runs", "events"} <= await _tables(url)
        await asyncio.to_thread(migrate.downgrade, url, "base")
        assert not {"runs", "events"} & await _tables(url)
        await asyncio.to_thread(migrate.upgrade, url)
        assert await migrate.current_revision(url) == migrate.head_revision()
        assert await _diff(url) == []
    finally:
        await databases.drop(url)


async def test_error_code_migration_when_runs_ended_in_run_error_then_their_code_backfilled(
    databases: Databases,
) -> None:
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url, "0004_disconnect_policy")
        # (run, last terminal, its events): a chunk text jsonb would refuse (\u0000)
        # must not stop the backfill; only the last RUN_ERROR's code counts.
        runs = {
            "m-ag": ("RUN_ERROR", ['{"type":"RUN_ERROR","message":"m","code":"abandoned"}']),
            "m-ts": ("RUN_ERROR", ['{"type":"RUN_ERROR","error":{"message":"m","code":"rate"}}']),
            "m-nul": (
                "RUN_ERROR",
                ['{"type":"A","delta":"\\u0000"}',
                 '{"type":"RUN_ERROR","message":"\\u0000","code":"x\\u0000y"}'],
            ),
            "m-last": (
                "RUN_ERROR",
                ['{"type":"RUN_ERROR","code":"first"}', '{"type":"RUN_ERROR","code":"second"}'],
            ),
            "m-none": ("RUN_ERROR", ['{"type":"RUN_ERROR","message":"no code"}']),
            "m-fin": (
                "RUN_FINISHED", ['{"type":"RUN_ERROR","code":"old"}', '{"type":"RUN_FINISHED"}'],
            ),
        }  # fmt: skip
        conn = await asyncpg.connect(url)
        try:
            for run_id, (terminal, chunks) in runs.items():
                await conn.execute(
                    "INSERT INTO runs (run_id, last_seq, last_terminal) VALUES ($1, $2, $3)",
                    run_id, len(chunks), terminal,
                )  # fmt: skip
                await conn.executemany(
                    "INSERT INTO events (run_id, seq, type, chunk) VALUES ($1, $2, $3, $4)",
                    [(run_id, i + 1, json.loads(c)["type"], c) for i, c in enumerate(chunks)],
                )
        finally:
            await conn.close()
        await asyncio.to_thread(migrate.upgrade, url)
        conn = await asyncpg.connect(url)
        try:
            codes = dict(await conn.fetch("SELECT run_id, error_code FROM runs"))
        finally:
            await conn.close()
        assert codes == {
            "m-ag": "abandoned", "m-ts": "rate", "m-nul": "x\ufffdy", "m-last": "second",
            "m-none": None, "m-fin": None,
        }  # fmt: skip
    finally:
        await databases.drop(url)


async def _rows(url: str, query: str) -> list[str]:
    conn = await asyncpg.connect(url)
    try:
        return [r[0] for r in await conn.fetch(query)]
    finally:
        await conn.close()


_EVENT_ROWS = (
    "SELECT (run_id, seq, type, chunk, message_id, tool_call_id, received_at)::text"
    " FROM events ORDER BY run_id, seq"
)
_RUN_ROWS = "SELECT (runs.*)::text FROM runs ORDER BY run_id"
_COMPRESSION = (
    "SELECT attcompression::text FROM pg_attribute WHERE attname = '{}' AND attrelid IN"
    " (SELECT 'events'::regclass UNION ALL"
    "  SELECT inhrelid FROM pg_inherits WHERE inhparent = 'events'::regclass)"
)
_CHUNK_COMPRESSION = _COMPRESSION.format("chunk")
_TYPE_COMPRESSION = _COMPRESSION.format("type")


async def test_partitioned_events_migration_when_up_and_down_then_every_row_byte_identical(
    databases: Databases,
) -> None:
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url, "0005_error_code")
        conn = await asyncpg.connect(url)
        try:
            # Runs of three months (one across a year's end in UTC, not in local time),
            # an event whose run row is gone, and text a partition must keep as it is.
            for run_id, created in (
                ("m-a", "2025-01-31T23:59:59.999999+00"),
                ("m-b", "2025-02-01T00:00:00+00"),
                ("m-c", "2026-12-31T23:30:00-05"),
            ):
                await conn.execute(
                    "INSERT INTO runs (run_id, created_at, last_seq)"
                    " VALUES ($1, $2::text::timestamptz, 3)",
                    run_id, created,
                )  # fmt: skip
                await conn.executemany(
                    "INSERT INTO events (run_id, seq, type, chunk, message_id, received_at)"
                    " VALUES ($1, $2, 'A', $3, $4, $5::text::timestamptz)",
                    [
                        (run_id, i, f'{{"type":"A","d":"\\u00e9 {i}\\u0000"}}',
                         None if i % 2 else "m", "2024-07-01T00:00:00.123456+00")
                        for i in range(1, 4)
                    ],
                )  # fmt: skip
            await conn.execute(
                "INSERT INTO events (run_id, seq, type, chunk, received_at)"
                " VALUES ('gone', 1, 'A', '{}', '2024-03-05T00:00:00+00')"
            )
        finally:
            await conn.close()
        events, runs = await _rows(url, _EVENT_ROWS), await _rows(url, _RUN_ROWS)
        await asyncio.to_thread(migrate.upgrade, url)
        assert await _rows(url, _EVENT_ROWS) == events
        placed = await _rows(
            url, "SELECT run_id || ' ' || tableoid::regclass::text FROM events ORDER BY 1"
        )
        assert placed == [
            "gone events_2024_03",
            *("m-a events_2025_01" for _ in range(3)),
            *("m-b events_2025_02" for _ in range(3)),
            *("m-c events_2027_01" for _ in range(3)),
        ]
        month = await _rows(url, "SELECT run_id || ' ' || run_month FROM runs ORDER BY 1")
        assert month == ["m-a 2025-01-01", "m-b 2025-02-01", "m-c 2027-01-01"]
        assert await _diff(url) == []
        await asyncio.to_thread(migrate.downgrade, url, "0005_error_code")
        assert await _rows(url, _EVENT_ROWS) == events
        assert await _rows(url, _RUN_ROWS) == runs
        assert not [t for t in await _tables(url) if t.startswith("events_")]
    finally:
        await databases.drop(url)


async def test_event_batches_migration_when_down_then_a_row_per_event_and_up_reads_the_same(
    databases: Databases,
) -> None:
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url)
        chunks = [{"type": f"T{i % 3}", "d": f"\u00e9 {i}\u0000", "i": i} for i in range(300)]
        async with EventLog.connect(url) as log:
            await log.append("b-1", [{"type": "A"}])
            await log.append("b-1", chunks)  # two batch rows: 256 and 44 events
            await log.append("b-1", [{"type": "B"}])
            before = await log.read_events("b-1", 0, 1000)
        assert await _rows(url, "SELECT n FROM events ORDER BY seq") == [1, 256, 44, 1]
        # lz4 on `events`, the partitions the migrations made and one made since.
        pool = await asyncpg.create_pool(url, min_size=1, max_size=1)
        try:
            assert await partitions.ensure(pool, [date(2031, 5, 1)]) == [date(2031, 5, 1)]
        finally:
            await pool.close()
        assert set(await _rows(url, _CHUNK_COMPRESSION)) == {"l"}
        # And on their types (a batch row's are several kilobytes), from 0008.
        assert set(await _rows(url, _TYPE_COMPRESSION)) == {"l"}
        await asyncio.to_thread(migrate.downgrade, url, "0007_event_batches")
        assert set(await _rows(url, _TYPE_COMPRESSION)) == {""}
        async with EventLog.connect(url) as log:
            after = await log.read_events("b-1", 0, 1000)
        assert [(e.seq, e.type, e.chunk) for e in after] == [
            (e.seq, e.type, e.chunk) for e in before
        ]
        await asyncio.to_thread(migrate.downgrade, url, "0006_partitioned_events")
        assert set(await _rows(url, _CHUNK_COMPRESSION)) == {""}
        conn = await asyncpg.connect(url)
        try:
            stored = await conn.fetch(
                "SELECT seq, type, chunk, received_at FROM events ORDER BY seq"
            )
        finally:
            await conn.close()
        assert len(stored) == 302
        assert [(r["seq"], r["type"], r["chunk"], r["received_at"]) for r in stored] == [
            (e.seq, e.type, e.chunk, e.received_at) for e in before
        ]
        await asyncio.to_thread(migrate.upgrade, url)
        async with EventLog.connect(url) as log:
            assert await log.read_events("b-1", 0, 1000) == before
    finally:
        await databases.drop(url)
