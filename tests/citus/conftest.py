"""The Citus suite's fixtures: one Citus cluster (a coordinator and two workers) per session.

These tests run only with `--citus` (`ops/test --citus`): the default suite does not need
Citus. The cluster's `replay` database is migrated once (`agent-replay migrate`, which
distributes the log on it, revision 0014_citus) and shared by every module: each test uses
run ids of its own, as the log's contract suite does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agent_replay import migrate
from tests.support.citus import CitusCluster, citus_cluster, missing_citus
from tests.support.pg import Databases


@pytest.fixture(scope="session")
def citus() -> Iterator[CitusCluster]:
    reason = missing_citus()
    if reason is not None:
        pytest.fail(reason)
    with citus_cluster(workers=2) as cluster:
        migrate.upgrade(cluster.url())
        yield cluster


@pytest.fixture(scope="module")
def database_url(citus: CitusCluster) -> str:
    """The Citus coordinator's migrated database (shared: tests use their own run ids)."""
    return citus.url()


@pytest.fixture(scope="module")
async def standby_url(databases: Databases) -> AsyncIterator[str]:
    """The contract suite's stand-in standby: a plain PostgreSQL database that holds what
    its `replay` copied (the standby's role does not depend on Citus)."""
    url = await databases.clone()
    yield url
    await databases.drop(url)
