"""Alembic environment: async, configured by agent_replay.migrate (no alembic.ini)."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection

from agent_replay.log.engine import plain_engine
from agent_replay.log.schema import include_object, metadata

config = context.config


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        compare_type=True,
        include_object=include_object,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_online() -> None:
    # asyncpg opens the connection: a URL naming several hosts works as it does for the log.
    engine = plain_engine(config.get_main_option("sqlalchemy.url") or "", poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_configure)
    await engine.dispose()


if context.is_offline_mode():
    context.configure(
        url=config.get_main_option("sqlalchemy.url"), target_metadata=metadata, literal_binds=True
    )
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
