"""SQLAlchemy's engine on the log's database, for alembic (`agent_replay.migrate`).

The service's own reads and writes go through the log's asyncpg pools; alembic runs on
SQLAlchemy, so the migrations get an engine here, whose connections asyncpg opens from
the same DSN as the log's pool (`async_creator`): whatever asyncpg accepts works here
too, several hosts with `target_session_attrs` (failover) included.
"""

from __future__ import annotations

from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from agent_replay.config import asyncpg_dsn


def plain_engine(
    url: str,
    *,
    connect_seconds: float = 60.0,  # asyncpg's own default: a migration is not in a hurry
    statement_seconds: float | None = None,
    **options: Any,
) -> AsyncEngine:
    """An engine whose connections asyncpg opens from `url` (`options`: the pool's), with
    SQLAlchemy's own exceptions (migrations, which report them as they are)."""
    dsn = asyncpg_dsn(url)

    async def connect() -> asyncpg.Connection:
        return await asyncpg.connect(
            dsn, timeout=connect_seconds, command_timeout=statement_seconds
        )

    # The URL only names the dialect: connections come from `connect`.
    return create_async_engine("postgresql+asyncpg://", async_creator=connect, **options)
