"""A hosted run streaming across a 10-second database outage: its driver keeps reading the
upstream, appends what it holds once the database is back, keeps its lease (another
replica's reaper never takes it), and the run ends complete, with no gap."""

from __future__ import annotations

import asyncio
import json
import time
from typing import IO

import httpx

from tests.faults.agents import PACED_DELTAS, PACED_SECONDS
from tests.faults.conftest import Follower, following, replica, stored, until
from tests.support.cluster import Cluster

OUTAGE_SECONDS = 10.0
AGENTS = json.dumps({"paced": "python:tests.faults.agents:paced"})


async def test_hosted_run_across_10s_outage_then_complete_no_gap_and_never_reaped(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    # The lease outlasts the outage; replica B reaps (its reaper runs every lease / 3).
    env = {"REPLAY_AGENTS": AGENTS, "REPLAY_LEASE_SECONDS": "15"}
    with (
        replica(database, server_log, **env) as (a, _),
        replica(database, server_log, **env) as (
            b,
            _,
        ),
    ):
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{a}/v1/agents/paced/runs", json={"threadId": "t-outage"})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
            follower = Follower([b], run_id)
            async with following(http, [follower]) as tasks:
                # Stop the database while the upstream is mid-answer.
                async def started() -> bool:
                    return len(follower.events) >= 10

                await until(started)
                held_before = len(follower.events)
                await asyncio.to_thread(cluster.stop)
                stopped = time.monotonic()
                await asyncio.sleep(OUTAGE_SECONDS)
                await asyncio.to_thread(cluster.start)
                async with asyncio.timeout(PACED_DELTAS * PACED_SECONDS + 60):
                    await asyncio.gather(*tasks)
            outage = time.monotonic() - stopped
            run = (await http.get(f"{b}/v1/runs/{run_id}")).json()
            log = await stored(http, b, run_id)

    # Ended by its own upstream, not reaped, not interrupted.
    assert (run["status"], run["closed"], run["error"]) == ("finished", True, None)
    types = [c["type"] for _, c in log]
    assert types[0] == "CUSTOM" and types[1] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "RUN_ERROR" not in types
    deltas = [c["delta"] for _, c in log if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == [f"<{n}>" for n in range(1, PACED_DELTAS + 1)]  # no gap, no duplicate
    assert [s for s, _ in log] == list(range(1, len(log) + 1))
    assert follower.events == log
    assert held_before < len(log)
    print(
        f"FIGURES hosted run: {len(log)} events across a {OUTAGE_SECONDS:.0f}s outage "
        f"({outage:.1f}s with restart), none lost, run {run['status']}"
    )
