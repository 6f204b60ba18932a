"""The registry's lease keeper: every driven run renewed in one statement; a run whose
lease another process holds stops being driven here."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx

from agent_replay.config import asyncpg_dsn
from tests.conftest import settings_for
from tests.support.servers import serve_in_process

DEADLINE = 20.0


async def _hosted_runs(http: httpx.AsyncClient) -> float:
    for line in (await http.get("/metrics")).text.splitlines():
        if line.startswith("replay_hosted_runs "):
            return float(line.split()[1])
    raise AssertionError("no replay_hosted_runs gauge")


async def test_keeper_when_another_owner_took_the_lease_then_driver_stops_writing_nothing(
    database_url: str,
) -> None:
    # A lease of 1 s is renewed every 0.33 s; the demo, at 0.2 s an event, outlasts
    # many renewals before it would finish by itself.
    settings = settings_for(database_url, lease_seconds=1.0, demo_delay_seconds=0.2)
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=30) as http,
    ):
        run_id = (await http.post("/v1/agents/demo/runs", json={})).json()["run_id"]
        conn = await asyncpg.connect(asyncpg_dsn(database_url))
        try:
            async with asyncio.timeout(DEADLINE):
                # Renewed while driven: past two leases, nobody could take it over.
                while (await http.get(f"/v1/runs/{run_id}")).json()["last_seq"] < 12:  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            assert await conn.fetchval(
                "SELECT lease_expires_at > now() FROM runs WHERE run_id = $1", run_id
            )
            await conn.execute(
                "UPDATE runs SET lease_owner = 'elsewhere/1', "
                "lease_expires_at = now() + interval '1 hour' WHERE run_id = $1",
                run_id,
            )
            async with asyncio.timeout(DEADLINE):
                # No event exists for "the driver stopped": poll the gauge, with a deadline.
                while await _hosted_runs(http):  # noqa: ASYNC110
                    await asyncio.sleep(0.05)
            run = (await http.get(f"/v1/runs/{run_id}")).json()
            events = (await http.get(f"/v1/runs/{run_id}/events")).json()["events"]
        finally:
            await conn.close()
    # Stopped, not finished: the run was left to its new owner, nothing written for it.
    assert not run["closed"] and run["status"] == "running"
    assert events[-1]["chunk"]["type"] not in ("RUN_FINISHED", "RUN_ERROR")
