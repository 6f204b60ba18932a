"""Shared fixtures: a real PostgreSQL, migrated databases, the service on a socket."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from service.config import Settings
from service.log import EventLog
from tests.pg import Databases, server_url
from tests.servers import Running, serve_in_process

NODE_HARNESS = Path(__file__).resolve().parent / "node"


@pytest.fixture(scope="session")
def node_harness() -> Path:
    """tests/node with its pinned npm packages (TanStack AI, the AI SDK, AG-UI,
    Playwright) installed: a fresh clone has no node_modules. Node is part of the test setup, so its
    absence fails the tests that need it rather than skipping them."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("Node.js and npm are needed to run TanStack AI's client and Playwright")
    installed = NODE_HARNESS / "node_modules"
    needed = ("@tanstack/ai-client", "playwright-core", "ai", "ai5", "@ag-ui/client")
    if not all((installed / name).is_dir() for name in needed):
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=NODE_HARNESS,
            check=True,
            timeout=300,
        )
    return NODE_HARNESS


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
    # The demo agent unpaced: its default pace is for people watching it.
    settings = settings_for(database_url, heartbeat_seconds=1.0, demo_delay_seconds=0.001)
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def client(service: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
        yield http


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--durable-conformance",
        action="store_true",
        help="also run the Durable Streams conformance suite (about a minute; .ci/run does)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Deselected, not skipped: without the flag the suite is simply not asked for.
    if config.getoption("--durable-conformance"):
        return
    kept = [item for item in items if item.get_closest_marker("conformance") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(
            items=[item for item in items if item.get_closest_marker("conformance")]
        )
        items[:] = kept


@pytest.fixture(scope="session")
def durable_harness() -> Path:
    """tests/durable/node: the Durable Streams conformance suite and client, pinned."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("Node.js and npm are needed to run the Durable Streams suite and client")
    harness = Path(__file__).resolve().parent / "durable" / "node"
    installed = harness / "node_modules" / "@durable-streams"
    if not ((installed / "server-conformance-tests").is_dir() and (installed / "client").is_dir()):
        subprocess.run(
            ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=harness,
            check=True,
            timeout=300,
        )
    return harness
