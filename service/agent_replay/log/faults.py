"""The one translation of database-driver failures into the service's error tree.

Every use of asyncpg runs inside `translated(...)`, as httpx's
`map_httpcore_exceptions` wraps its transport: whatever the driver raises
leaves `agent_replay.log` as a `ReplayError` chained to it (`raise ... from exc`),
so no other layer catches driver exceptions, and no client sees the driver's
own text for a failure that is not theirs (it goes to the log instead).

    asyncpg / OS failure                          service error
    ─────────────────────────────────────────     ──────────────────────────────
    DataError (a value PostgreSQL refuses)        Unstorable   422 invalid_request
    SQLSTATE RE410 (a run on an erased thread)    Erased       410 erased
    TransactionRollbackError (deadlock, ...)      Contended    503 unavailable
    DiskFullError (no space for the data)         Unavailable  503 unavailable ("no space")
    connection refused / lost, timeout,           Unavailable  503 unavailable
      server shutting down, out of connections
    any other PostgresError (a statement bug)     Unavailable  503 unavailable (logged)

The audit's SQLAlchemy engine (`engine.py`) goes through the same table:
SQLAlchemy wraps the driver's exception (`DBAPIError.orig`, itself chained to
asyncpg's), so the driver's own exception is found under the wrappers and
translated as if asyncpg had raised it directly; a pool that cannot hand out
a connection in time (`sqlalchemy.exc.TimeoutError`) is the database being
unreachable.

`translate` is also what a task that must outlive one failure (a commit
lane) uses for whatever it caught: a bug there is logged, and its callers
get a 503 rather than the exception's text.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import TracebackType

import asyncpg
import sqlalchemy.exc

from agent_replay.errors import Contended, Erased, ReplayError, Unavailable, Unstorable

log = logging.getLogger("replay.log")

# What `runs`' trigger raises for a run made under an erased run's id or on an
# erased thread (revision 0012_erasure).
ERASED_SQLSTATE = "RE410"

# What "the database cannot be reached right now" looks like from the driver.
UNREACHABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.OperatorInterventionError,  # admin shutdown, cannot connect now, cancelled
    asyncpg.InsufficientResourcesError,  # too many connections, disk full
    # A connection whose protocol lost track of an operation the server's going away
    # interrupted ("another operation is in progress"): see `acquire`.
    asyncpg.InternalClientError,
)


def driver_cause(exc: BaseException) -> BaseException:
    """The driver's own exception under SQLAlchemy's wrappers (`exc` itself when unwrapped)."""
    if isinstance(exc, sqlalchemy.exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
        # SQLAlchemy's asyncpg adapter re-raises asyncpg's exception as a DBAPI one.
        cause = exc.__cause__
        if isinstance(cause, (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)):
            return cause
    return exc


def translate(action: str, exc: BaseException, *, refused: str | None = None) -> ReplayError:
    """The service error for driver failure `exc` while doing `action`."""
    if isinstance(exc, ReplayError):
        return exc
    wrapped, exc = exc, driver_cause(exc)
    if isinstance(exc, sqlalchemy.exc.TimeoutError) or (
        # SQLAlchemy recognised a lost connection (and dropped it from its pool).
        isinstance(wrapped, sqlalchemy.exc.DBAPIError) and wrapped.connection_invalidated
    ):
        log.warning("%s: %s: %s", action, type(exc).__name__, exc)
        return Unavailable(f"{action}: the database is unreachable")
    if isinstance(exc, asyncpg.PostgresError) and exc.sqlstate == ERASED_SQLSTATE:
        return Erased(f"{action}: {exc.args[0] if exc.args else 'erased'}")
    if isinstance(exc, asyncpg.DataError):
        # The caller's data: its own text is what they need to fix it.
        return Unstorable(f"{refused or action}: {exc}")
    if isinstance(exc, asyncpg.DiskFullError):
        # Nothing of the statement was applied; it will work again once space is freed.
        log.warning("%s: %s", action, exc)
        return Unavailable(f"{action}: the database has no space left on its disk")
    if isinstance(exc, asyncpg.TransactionRollbackError):
        return Contended(f"{action}: conflicting concurrent writes; try again")
    if isinstance(exc, UNREACHABLE):
        log.warning("%s: %s: %s", action, type(exc).__name__, exc)
        return Unavailable(f"{action}: the database is unreachable")
    log.error("%s", action, exc_info=exc)
    if isinstance(exc, asyncpg.PostgresError):
        return Unavailable(f"{action}: the database refused the statement")
    return Unavailable(f"{action}: an internal error (logged)")


class translated:
    """`with translated("the event log cannot be read"):` around driver calls.

    A class rather than a generator context manager: it wraps every group
    commit and every stream read. `refused` names what a `DataError` refused
    ("metadata cannot be stored"); it defaults to `action`.
    """

    __slots__ = ("action", "refused")

    def __init__(self, action: str, *, refused: str | None = None) -> None:
        self.action = action
        self.refused = refused

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if ev is None or isinstance(ev, ReplayError) or not isinstance(ev, Exception):
            return  # success, ours already, or CancelledError / KeyboardInterrupt
        if isinstance(ev, DRIVER_ERRORS):
            raise translate(self.action, ev, refused=self.refused) from ev


DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
    # The audit engine's: the driver's failures wrapped, and a pool checkout timed out.
    sqlalchemy.exc.DBAPIError,
    sqlalchemy.exc.TimeoutError,
)


@asynccontextmanager
async def acquire(
    pool: asyncpg.Pool, wait: float | None = None
) -> AsyncIterator[asyncpg.pool.PoolConnectionProxy]:
    """A pool connection that is never handed out again after the driver lost its state.

    When the server goes away mid-statement, asyncpg can be left believing an
    operation is still in progress on a connection that looks open; the pool's
    release does not notice, and every later use of it would fail. Such a
    connection is terminated instead, so the pool opens a fresh one.
    """
    async with pool.acquire(timeout=wait) as conn:
        try:
            yield conn
        except asyncpg.InternalClientError:
            conn.terminate()
            raise
