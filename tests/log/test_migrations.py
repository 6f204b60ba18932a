"""Migrations are the only schema builder: they must agree with the models and reverse cleanly."""

from __future__ import annotations

import asyncio

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
