"""Shared fixtures: a real PostgreSQL, migrated databases, the service on a socket."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from agent_replay.config import Settings
from agent_replay.log import EventLog
from tests.support.cluster import running_cluster
from tests.support.pg import Databases, server_url
from tests.support.proxy import nginx_in_front
from tests.support.servers import Running, serve_in_process, serve_subprocess

NODE_HARNESS = Path(__file__).resolve().parent / "node"


@pytest.fixture(scope="session")
def node_harness() -> Path:
    """tests/node with its pinned npm packages (TanStack AI, the AI SDK, AG-UI,
    Playwright) installed. `ops/test` runs `npm ci` there before the suite, so a missing
    Node or registry is one message up front rather than a failure inside a test."""
    needed = ("@tanstack/ai-client", "playwright-core", "ai", "ai5", "ai6", "@ag-ui/client")
    return _installed(NODE_HARNESS, needed)


def _installed(harness: Path, needed: tuple[str, ...]) -> Path:
    # Node is part of the test setup, so its absence fails the tests that need it.
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("Node.js 20 or newer and npm are needed here (ops/test names how to get them)")
    missing = [name for name in needed if not (harness / "node_modules" / name).is_dir()]
    if missing:
        pytest.fail(f"{harness} lacks {', '.join(missing)}: run ops/test, or `npm ci` there")
    return harness


@pytest.fixture(scope="session")
def chromium() -> str:
    """Debian's Chromium, for tests that look at a page as a browser renders it."""
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("Chromium is needed here (apt-get install chromium; ops/test installs it)")
    return found


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
        "--quick",
        action="store_true",
        help="leave out the tests that need Node, a browser, nginx, private PostgreSQL "
        "clusters, `agent-replay serve` processes or a wheel built and installed, and the "
        "thousand-example property runs (ops/test --quick)",
    )
    parser.addoption(
        "--citus",
        action="store_true",
        help="run tests/citus, against a Citus cluster of private PostgreSQL clusters "
        "(ops/test --citus; it needs Citus installed)",
    )


# What a test needs beyond Python, gcc and one PostgreSQL server, known by the fixtures it
# asks for or by the helpers its module imports (a module that starts clusters, nginx or
# `agent-replay serve` processes does so for its tests), so a new test is sorted without anyone
# remembering a marker; a test that uses them some other way carries the marker itself, as
# does a `slow` one (a property run of a thousand examples).
HEAVY = ("node", "browser", "cluster", "nginx", "processes", "packaging", "slow")
NEEDS_BY_FIXTURE = {
    "node_harness": "node",
    "durable_harness": "node",
    "chromium": "browser",
    "cluster": "cluster",
    "replicas": "processes",
    "clone": "packaging",
}
NEEDS_BY_HELPER = {
    running_cluster: "cluster",
    nginx_in_front: "nginx",
    serve_subprocess: "processes",
}


def heavy(item: pytest.Item) -> set[str]:
    """The markers (of HEAVY) that keep `item` out of the quick subset."""
    fixtures = getattr(item, "fixturenames", ())
    found = {need for name, need in NEEDS_BY_FIXTURE.items() if name in fixtures}
    module = getattr(item, "module", None)
    imported = list(vars(module).values()) if module is not None else []
    found |= {
        need for helper, need in NEEDS_BY_HELPER.items() if any(v is helper for v in imported)
    }
    found |= {mark.name for mark in item.iter_markers() if mark.name in HEAVY}
    return found


CITUS_TESTS = Path(__file__).resolve().parent / "citus"


def on_citus(item: pytest.Item) -> bool:
    return CITUS_TESTS in Path(str(item.path)).parents


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for need in sorted(heavy(item)):
            item.add_marker(need)
        if on_citus(item):
            item.add_marker("cluster")
    # The Citus suite needs Citus: only `--citus` (ops/test --citus) asks for it.
    if not config.getoption("--citus"):
        citus = [item for item in items if on_citus(item)]
        if citus:
            config.hook.pytest_deselected(items=citus)
            items[:] = [item for item in items if not on_citus(item)]
    if not config.getoption("--quick"):
        return
    # Deselected, not skipped: the quick subset simply does not ask for them.
    left_out = [item for item in items if heavy(item)]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not heavy(item)]


@pytest.fixture(scope="session")
def durable_harness() -> Path:
    """tests/durable/node: the Durable Streams conformance suite and client, pinned
    (`ops/test` runs `npm ci` there)."""
    harness = Path(__file__).resolve().parent / "durable" / "node"
    return _installed(
        harness, ("@durable-streams/server-conformance-tests", "@durable-streams/client")
    )
