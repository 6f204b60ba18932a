"""A run made while its thread (or its id) is being erased: it waits for the erasure and is
then refused, never made on an erased thread nor under an erased id. The erasure is held
open by hand here (its locks taken, its rows written, not yet committed), so the
creation is certain to be under way while it runs."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from agent_replay.errors import Erased
from agent_replay.log import EventLog
from agent_replay.log.sql import QUERIES

DEADLINE = 30.0


async def _waiting(db: asyncpg.Connection, task: asyncio.Task[object]) -> None:
    """Until another backend waits on a lock (the creation, blocked by the erasure)."""
    async with asyncio.timeout(DEADLINE):
        # No event tells of a backend's wait: PostgreSQL's view of it is polled.
        while not task.done() and not await db.fetchval(  # noqa: ASYNC110
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ):
            await asyncio.sleep(0.01)
    assert not task.done(), "the creation did not wait for the erasure"


@pytest.mark.parametrize("by", ["thread", "run id"])
async def test_create_when_erasure_of_its_thread_or_id_in_flight_then_refused_after_it(
    database_url: str, by: str
) -> None:
    thread, run = f"race-{by.replace(' ', '-')}", f"race-run-{by.replace(' ', '-')}"
    log = await EventLog.open(database_url)
    erasing = await asyncpg.connect(database_url)
    watching = await asyncpg.connect(database_url)
    try:
        await log.create_run(run, thread_id=thread)
        await log.append(run, [{"type": "A"}])
        tx = erasing.transaction()
        await tx.start()
        await erasing.execute(QUERIES["erase_lock_thread"], thread)
        assert len(await erasing.fetch(QUERIES["erase_pick"], thread)) == 1
        await erasing.execute(QUERIES["erase_run"], run, 1, "00", "test", None)
        if by == "thread":
            creating = asyncio.create_task(log.create_run(f"{run}-new", thread_id=thread))
        else:
            creating = asyncio.create_task(log.create_run(run))
        await _waiting(watching, creating)
        await tx.commit()
        with pytest.raises(Erased):
            await creating
        assert await log.find_run(f"{run}-new") is None and await log.find_run(run) is None
    finally:
        await watching.close()
        await erasing.close()
        await log.close()
