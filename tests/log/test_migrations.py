"""Migrations are the only schema builder: they must agree with the models and reverse cleanly."""

from __future__ import annotations

import asyncio
import json

import asyncpg
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from service import migrate
from service.config import sqlalchemy_url
from service.log.schema import metadata
from tests.pg import Databases


async def _diff(url: str) -> list[object]:
    engine = create_async_engine(sqlalchemy_url(url))
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata)
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
        assert await migrate.at_head(url)
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
