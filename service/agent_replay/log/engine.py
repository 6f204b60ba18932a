"""SQLAlchemy's engine on the log's database, for the audit's composed queries.

The audit builds its filtered, keyset-paged queries with SQLAlchemy Core over
the log's tables (`schema.py`); it gets its engine here, from the log, like
everything else that reaches the database.

The engine is the log's in two more ways. Its connections are opened by
asyncpg from the same DSN as the log's pool (`async_creator`), so whatever
asyncpg accepts works here too: several hosts with `target_session_attrs`
(failover), the same connect and statement bounds. And whatever the driver
raises inside `async with engine.connect()` / `engine.begin()` (connecting
included) leaves as the service error `faults.translate` makes of it: a
database away is `503 unavailable`, never a 500 with SQLAlchemy's text.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from agent_replay.config import asyncpg_dsn
from agent_replay.log.faults import DRIVER_ERRORS, translate

_ACTION = "the audit cannot read the database"


class _TranslatedConnection(AsyncConnection):
    __slots__ = ()

    async def start(self, is_ctxmanager: bool = False) -> AsyncConnection:
        try:
            return await super().start(is_ctxmanager)
        except DRIVER_ERRORS as exc:
            raise translate(_ACTION, exc) from exc

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await super().__aexit__(et, ev, tb)
        except DRIVER_ERRORS as exc:
            # Closing a connection the server dropped: the block's own failure says more.
            if ev is None:
                raise translate(_ACTION, exc) from exc
        if isinstance(ev, DRIVER_ERRORS):
            raise translate(_ACTION, ev) from ev


class _TranslatedEngine(AsyncEngine):
    __slots__ = ()
    _connection_cls = _TranslatedConnection


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


def open_engine(
    url: str,
    *,
    pool_size: int | None = None,
    max_overflow: int = 0,
    connect_seconds: float = 3.0,
    statement_seconds: float = 30.0,
) -> AsyncEngine:
    """An engine that connects lazily; without `pool_size`, one connection per use (a command)."""
    options: dict[str, Any] = (
        {"poolclass": NullPool}
        if pool_size is None
        else {
            "pool_size": pool_size,
            "max_overflow": max_overflow,
            "pool_timeout": connect_seconds,
            # A pooled connection the database dropped (a restart, a failover) is
            # replaced at checkout instead of failing the first query after it.
            "pool_pre_ping": True,
        }
    )
    engine = plain_engine(
        url, connect_seconds=connect_seconds, statement_seconds=statement_seconds, **options
    )
    return _TranslatedEngine(engine.sync_engine)
