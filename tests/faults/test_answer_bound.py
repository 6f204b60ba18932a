"""Each append's answer bound is its own: against a hung database (every PostgreSQL
process stopped), appends made at different times each answer `Unavailable` once
their own `answer_seconds` have passed, not sooner and not never, and one that
was still queued when it gave up is never stored."""

from __future__ import annotations

import asyncio

import pytest

from agent_replay.errors import Unavailable
from agent_replay.log import EventLog
from tests.faults.conftest import chunk
from tests.support.cluster import Cluster

BOUND = 0.6
# The second append comes this long after the first: its bound ends after the first's.
STAGGER = 0.4


async def _refused_after(log: EventLog, run_id: str) -> float:
    """Seconds from the append to its Unavailable."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(Unavailable):
        await log.append(run_id, [chunk(run_id, 1)])
    return loop.time() - started


async def test_appends_when_database_hangs_then_each_unavailable_after_its_own_bound(
    cluster: Cluster, database: str
) -> None:
    # One lane: the second append waits in the queue behind the first's group.
    log = await EventLog.open(database, answer_seconds=BOUND, commit_lanes=1)
    try:
        await log.append("bound-0", [chunk("bound-0", 1)])  # connected, before the hang
        await asyncio.to_thread(cluster.freeze)
        try:
            first = asyncio.create_task(_refused_after(log, "bound-1"))
            await asyncio.sleep(STAGGER)  # a later append, not a wait for anything
            second = asyncio.create_task(_refused_after(log, "bound-2"))
            # pytest-timeout fails the test if either never answers.
            waited = await asyncio.gather(first, second)
        finally:
            await asyncio.to_thread(cluster.thaw)
        assert all(seconds >= BOUND for seconds in waited), waited
        # bound-2 was still queued when it gave up: withdrawn, never stored.
        again = await log.append("bound-2", [chunk("bound-2", 1)])
        assert again.first_seq == 1
    finally:
        await log.close()
