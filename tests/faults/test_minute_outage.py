"""PostgreSQL stopped for a minute, twice the length of a hosted run's lease, while a hosted
run streams and followers read it through two replicas:

- every append answers within 5 s all along, `503 unavailable` with Retry-After while the
  database is away, and succeeds again within 5 s of PostgreSQL accepting connections;
- `/readyz` is 503 while `/healthz` stays 200;
- followers stay connected (heartbeats) or resume exactly once;
- the hosted run ends complete with no gap, and the other replica's reaper never takes its
  lease (it waits a whole pass past an expiry, and the driver renews the moment the
  database answers).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import IO, Any

import httpx

from tests.faults.agents import SLOW_DELTAS, SLOW_SECONDS
from tests.faults.conftest import (
    ANSWER_BOUND,
    Follower,
    chunk,
    following,
    probe_appends,
    replica,
    stored,
    until,
)
from tests.ops.scrape import scrape, value
from tests.support.cluster import Cluster

OUTAGE_SECONDS = 60.0
LEASE_SECONDS = 30
AGENTS = json.dumps({"slow": "python:tests.faults.agents:slow"})


async def _reaped(base: str) -> float:
    async with httpx.AsyncClient(base_url=base, timeout=10) as direct:
        return value(await scrape(direct), "replay_leases_reaped_total")


async def test_database_stopped_a_minute_then_503s_throughout_hosted_run_complete_and_kept(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    env = {
        "REPLAY_AGENTS": AGENTS,
        "REPLAY_LEASE_SECONDS": str(LEASE_SECONDS),
        "REPLAY_METRICS_PUBLIC": "true",
    }
    with (
        replica(database, server_log, **env) as (a, _),
        replica(database, server_log, **env) as (
            b,
            _,
        ),
    ):
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{a}/v1/agents/slow/runs", json={"threadId": "t-minute"})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
            # SSE and NDJSON, through the driving replica and the other one.
            followers = [
                Follower([a], run_id),
                Follower([b], run_id),
                Follower([a], run_id, ndjson=True),
                Follower([b], run_id, ndjson=True),
            ]
            probes: list[dict[str, Any]] = []
            stop_probe = asyncio.Event()
            async with following(http, followers) as tasks:

                async def started() -> bool:
                    return all(len(f.events) >= 5 for f in followers)

                await until(started)
                probe = asyncio.create_task(probe_appends(http, a, probes, stop_probe))
                held_before = len(followers[0].events)
                stopped_at = time.monotonic()
                await asyncio.to_thread(cluster.stop)
                down_at = time.monotonic()
                await asyncio.sleep(OUTAGE_SECONDS)
                starting_at = time.monotonic()
                await asyncio.to_thread(cluster.start)
                back_at = time.monotonic()
                async with asyncio.timeout(SLOW_DELTAS * SLOW_SECONDS + 60):
                    await asyncio.gather(*tasks)
                stop_probe.set()
                await probe
            run = (await http.get(f"{b}/v1/runs/{run_id}")).json()
            log = await stored(http, b, run_id)
            reaped = [await _reaped(a), await _reaped(b)]
            probe_log = await stored(http, a, "probe")

    # Every probe answered within the bound: 200 or 503, never a 500, never a hang.
    assert all(p["status"] != "timeout" for p in probes), probes
    assert all(p["took"] < ANSWER_BOUND for p in probes)
    assert {p["status"] for p in probes} <= {200, 503}
    refused = [p for p in probes if p["status"] == 503]
    assert refused, "the outage was never seen"
    for p in refused:
        assert p["body"]["error"]["code"] == "unavailable"
        assert p["retry_after"] == "1"
    # A refused append stored nothing: the probe run holds the acknowledged ones only.
    acknowledged = [p for p in probes if p["status"] == 200]
    assert [c for _, c in probe_log] == [chunk("probe", i + 1) for i in range(len(acknowledged))]
    # The database surely away (the whole minute): refused, not ready, yet alive.
    surely_down = [p for p in probes if down_at < p["at"] and p["end"] < starting_at]
    assert len(surely_down) > 100
    assert {(p["status"], p["ready"], p["health"]) for p in surely_down} == {(503, 503, 200)}
    # Appends work again within 5 s of PostgreSQL accepting connections: every probe
    # begun later than that was stored.
    late = [p for p in probes if p["at"] > back_at + ANSWER_BOUND]
    assert late and {(p["status"], p["ready"]) for p in late} == {(200, 200)}

    # The hosted run: finished by its upstream, nothing reaped, no gap, no duplicate.
    assert (run["status"], run["closed"], run["error"]) == ("finished", True, None)
    assert reaped == [0.0, 0.0]
    types = [c["type"] for _, c in log]
    assert types[1] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "RUN_ERROR" not in types
    deltas = [c["delta"] for _, c in log if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == [f"<{n}>" for n in range(1, SLOW_DELTAS + 1)]
    assert [s for s, _ in log] == list(range(1, len(log) + 1))
    # Still streaming when the database went away, and when it came back.
    assert held_before < len(log)
    for f in followers:
        assert f.events == log  # every event exactly once, in order
        assert f.heartbeats > 0

    first_503 = min(p["at"] + p["took"] for p in refused) - stopped_at
    recovered = min(p["at"] + p["took"] for p in probes if p["at"] > back_at and p["status"] == 200)
    print(
        f"FIGURES minute outage: {OUTAGE_SECONDS:.0f}s down; first 503 answered {first_503:.2f}s "
        f"after pg_ctl stop began; appends back {recovered - back_at:.2f}s after PostgreSQL "
        f"accepted connections; {len(refused)} probe appends refused, none stored; hosted run "
        f"{len(log)} events, {run['status']}, never reaped; "
        f"{sum(f.connects for f in followers)} stream connections for {len(followers)} followers"
    )
