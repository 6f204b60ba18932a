"""Alembic, driven from Python: the schema is only ever built by revisions."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.pool import NullPool

from agent_replay.config import asyncpg_dsn, sqlalchemy_url
from agent_replay.log.chaining import BackfillReport, backfill
from agent_replay.log.engine import plain_engine


def _migrations() -> Path:
    """The alembic scripts, inside the package: in a checkout its `migrations` is a link
    to the top level's `migrations/`, which a wheel ships as files of the package."""
    place = (Path(__file__).resolve().parent / "migrations").resolve()
    if not (place / "env.py").is_file():
        raise RuntimeError(f"no alembic scripts at {place}")
    return place


MIGRATIONS = _migrations()


def alembic_config(database_url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    # ConfigParser interpolation would eat a '%' in a password.
    config.set_main_option("sqlalchemy.url", sqlalchemy_url(database_url).replace("%", "%%"))
    return config


def _in_thread(fn: object, *args: object) -> None:
    # env.py runs its own event loop; keep it off any loop the caller owns.
    import threading

    errors: list[BaseException] = []

    def target() -> None:
        try:
            fn(*args)  # type: ignore[operator]
        except BaseException as exc:  # re-raised in the caller's thread
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def upgrade(database_url: str, revision: str = "head") -> None:
    _in_thread(command.upgrade, alembic_config(database_url), revision)


def downgrade(database_url: str, revision: str = "base") -> None:
    _in_thread(command.downgrade, alembic_config(database_url), revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config("postgresql://x/y")).get_current_head()


async def current_revision(database_url: str) -> str | None:
    engine = plain_engine(database_url, poolclass=NullPool)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: MigrationContext.configure(sync).get_current_revision()
            )
    finally:
        await engine.dispose()


async def chain_backfill(database_url: str, *, max_batches: int | None = None) -> BackfillReport:
    """Chain the runs stored before revision 0011_hash_chain (agent_replay.log.chaining):
    batched, resumable, safe beside a live service. `agent-replay migrate` runs it after
    alembic; `max_batches` stops it early (as an interruption would)."""
    import asyncpg

    pool = await asyncpg.create_pool(asyncpg_dsn(database_url), min_size=1, max_size=1)
    try:
        return await backfill(pool, max_batches=max_batches)
    finally:
        await pool.close()
