"""The reaper and budgets: a run whose driver died ends `budget_exhausted` once its time is out.

On a real log: runs leased by an owner that renews nothing (a dead process), each
with a budget stored as a start stores it (its metadata), closed by the reaper.
"""

from __future__ import annotations

import asyncio
import json
import time

from agent_replay.agents import Reaper
from agent_replay.agents.budget import Budget, exhausted
from agent_replay.agents.driver import Lease
from agent_replay.log import EventLog

DEADLINE = 30


async def _orphan(log: EventLog, run_id: str, budget: Budget, owner: str, seconds: float) -> float:
    """A run driven by `owner` that stopped renewing: its creation time (epoch seconds)."""
    metadata = {"budget": budget.to_json()} if budget else {}
    run, _ = await log.create_run(run_id, thread_id=f"t-{run_id}", agent="a", metadata=metadata)
    await log.append(run_id, [{"type": "CUSTOM", "name": "run.accepted", "value": {}}])
    assert await log.claim_lease(run_id, owner, seconds)
    return run.created_at.timestamp()


async def _until_past(moment: float) -> None:
    # No event exists for "the wall clock passed": poll it, with a deadline.
    async with asyncio.timeout(DEADLINE):
        while time.time() < moment:  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def _until_expired(log: EventLog, run_ids: set[str]) -> None:
    async with asyncio.timeout(DEADLINE):
        # No event exists for "the lease ran out": poll the store, with a deadline.
        while not run_ids <= set(await log.expired_leases(10_000)):  # noqa: ASYNC110
            await asyncio.sleep(0.02)


async def _last(log: EventLog, run_id: str) -> dict[str, object]:
    value: dict[str, object] = json.loads((await log.read_events(run_id))[-1].chunk)
    return value


async def test_reap_when_driver_died_then_out_of_time_run_budget_exhausted_others_interrupted(
    event_log: EventLog,
) -> None:
    out, within, plain = "reap-budget-out", "reap-budget-within", "reap-budget-none"
    created = await _orphan(event_log, out, Budget(max_seconds=0.2), "dead/1", 0.05)
    await _orphan(event_log, within, Budget(max_seconds=3600, max_events=5), "dead/1", 0.05)
    await _orphan(event_log, plain, Budget(), "dead/1", 0.05)
    await _until_expired(event_log, {out, within, plain})
    await _until_past(created + 0.2)
    reaper = Reaper(event_log, Lease("alive/1", 30))
    assert set(await reaper.reap_once()) >= {out, within, plain}
    run = await event_log.get_run(out)
    assert (run.status, run.error_code) == ("cancelled", "budget_exhausted")
    assert (await _last(event_log, out))["message"] == exhausted("max_seconds", 0.2)
    for run_id in (within, plain):
        run = await event_log.get_run(run_id)
        assert (run.status, run.error_code) == ("interrupted", "interrupted")


async def test_reaper_pass_when_run_out_of_time_then_due_at_once_others_after_a_pass(
    event_log: EventLog,
) -> None:
    out, within = "due-budget-out", "due-budget-within"
    created = await _orphan(event_log, out, Budget(max_seconds=0.2), "dead/2", 0.05)
    await _orphan(event_log, within, Budget(max_seconds=3600), "dead/2", 0.05)
    await _until_expired(event_log, {out, within})
    reaper = Reaper(event_log, Lease("alive/2", 30))
    # A run whose time is not out waits its pass of suspicion like any other.
    assert within not in await reaper.due({out, within}, set())
    await _until_past(created + 0.2)
    assert await reaper.due({out, within}, set()) == {out}
    assert await reaper.due({out, within}, {within}) == {out, within}


async def test_restart_when_earlier_life_drove_out_of_time_run_then_closed_budget_exhausted(
    event_log: EventLog,
) -> None:
    run_id = "restart-budget-out"
    created = await _orphan(event_log, run_id, Budget(max_seconds=0.1), "inst-b/old", 30)
    await _until_past(created + 0.1)
    reaper = Reaper(event_log, Lease("inst-b/new", 30), instance_id="inst-b")
    await reaper.start()
    await reaper.stop()
    run = await event_log.get_run(run_id)
    assert (run.status, run.error_code) == ("cancelled", "budget_exhausted")
