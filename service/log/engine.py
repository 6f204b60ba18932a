"""SQLAlchemy's engine on the log's database, for the audit's composed queries.

The audit builds its filtered, keyset-paged queries with SQLAlchemy Core over
the log's tables (`schema.py`); it gets its engine here, from the log, like
everything else that reaches the database.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import NullPool

from service.config import sqlalchemy_url


def open_engine(url: str, *, pool_size: int | None = None, max_overflow: int = 0) -> AsyncEngine:
    """An engine that connects lazily; without `pool_size`, one connection per use (a command)."""
    if pool_size is None:
        return create_async_engine(sqlalchemy_url(url), poolclass=NullPool)
    return create_async_engine(sqlalchemy_url(url), pool_size=pool_size, max_overflow=max_overflow)
