"""Shared fixtures: a real PostgreSQL, migrated databases, the service on a socket."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from service.config import Settings
from service.log import EventLog
from tests.pg import Databases, server_url
from tests.servers import Running, serve_in_process


@pytest.fixture(scope="session")
def databases() -> Iterator[Databases]:
    with server_url() as url:
        dbs = Databases(url)
        dbs.setup()
        try:
            yield dbs
        finally:
            dbs.teardown()


@pytest.fixture(scope="module")
async def database_url(databases: Databases) -> AsyncIterator[str]:
    """A migrated database of this module's own."""
    url = await databases.clone()
    yield url
    await databases.drop(url)


@pytest.fixture
async def event_log(database_url: str) -> AsyncIterator[EventLog]:
    log = await EventLog.open(database_url)
    yield log
    await log.close()


def settings_for(database_url: str, **overrides: object) -> Settings:
    return Settings(database_url=database_url, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
async def service(database_url: str) -> AsyncIterator[Running]:
    async with serve_in_process(settings_for(database_url, heartbeat_seconds=1.0)) as running:
        yield running


@pytest.fixture
async def client(service: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
        yield http
