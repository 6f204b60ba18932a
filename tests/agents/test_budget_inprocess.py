"""A budget stopping an in-process agent, in the test's own process: what the agent saw."""

from __future__ import annotations

import asyncio
import re

import httpx

from agent_replay.agents.budget import exhausted
from tests.agents import pyagents
from tests.agents.conftest import follow

_EXHAUSTED = re.compile(r'^replay_budgets_exhausted_total\{budget="max_events"\} (\S+)$', re.M)


async def _exhausted_count(http: httpx.AsyncClient) -> float:
    match = _EXHAUSTED.search((await http.get("/metrics")).text)
    return float(match.group(1)) if match else 0.0


async def test_in_process_agent_when_its_budget_runs_out_then_its_generator_is_closed_first(
    http: httpx.AsyncClient,
) -> None:
    before = await _exhausted_count(http)
    r = await http.post("/v1/agents/endless-python/runs", json={"budget": {"max_events": 20}})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    events = await follow(http, run_id)
    assert (events[-1]["type"], events[-1]["code"], events[-1]["message"]) == (
        "RUN_ERROR", "budget_exhausted", exhausted("max_events", 20))  # fmt: skip
    assert len(events) == 1 + 20 + 1  # run.accepted, the budget's worth, the RUN_ERROR
    # Its cleanup ran before the run was closed: the agent was stopped, not left running.
    assert run_id in pyagents.CLOSED
    assert await _exhausted_count(http) == before + 1


async def test_run_whose_time_is_out_before_its_driver_starts_then_driver_closes_it_at_once(
    http: httpx.AsyncClient,
) -> None:
    # A millisecond: gone before the driver starts (the run is created, its first
    # event stored and its lease claimed first), so the driver halts before its reader
    # has run a line.
    r = await http.post("/v1/agents/demo/runs", json={}, headers={"X-Budget": "max_seconds=0.001"})
    assert r.status_code == 201, r.text
    run_id = r.json()["run_id"]
    async with asyncio.timeout(20):  # the reaper, a lease (30 s) away, would say interrupted
        events = await follow(http, run_id)
    assert (events[-1]["type"], events[-1]["code"], events[-1]["message"]) == (
        "RUN_ERROR", "budget_exhausted", exhausted("max_seconds", 0.001))  # fmt: skip
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["error_code"]) == ("cancelled", "budget_exhausted")
