"""PostgreSQL stopped under load: producers retry, SSE and NDJSON followers hold on,
nothing is lost or stored twice, and the service heals by itself once the database is
back."""

from __future__ import annotations

import asyncio
import time
from typing import IO, Any

import httpx

from agent_replay.client import Producer, RetryPolicy
from tests.faults.conftest import (
    Follower,
    chunk,
    closing,
    following,
    probe_appends,
    produce_until,
    replica,
    stored,
    until,
)
from tests.support.cluster import Cluster

RUNS = 4
FOLLOWERS_PER_RUN = 2
OUTAGE_SECONDS = 6.0


async def test_database_stopped_under_load_then_log_holds_every_acknowledged_event_once(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    run_ids = [f"outage-{i}" for i in range(RUNS)]
    with replica(database, server_log) as (base, _):
        async with httpx.AsyncClient(timeout=30) as http:
            for run_id in run_ids:
                assert (
                    await http.put(
                        f"{base}/v1/runs/{run_id}", headers={"Content-Type": "application/json"}
                    )
                ).status_code == 201
            # Half SSE, half NDJSON.
            followers = [
                Follower([base], r, ndjson=k % 2 == 1)
                for r in run_ids
                for k in range(FOLLOWERS_PER_RUN)
            ]
            stop, stop_probe = asyncio.Event(), asyncio.Event()
            probes: list[dict[str, Any]] = []
            producers = [Producer(base, r, policy=RetryPolicy(give_up_after=60)) for r in run_ids]
            async with closing(producers), following(http, followers) as follow_tasks:
                probe = asyncio.create_task(probe_appends(http, base, probes, stop_probe))
                produce = [
                    asyncio.create_task(produce_until(p, r, stop))
                    for p, r in zip(producers, run_ids, strict=True)
                ]

                # Under load before the outage: every follower has events, a probe got in.
                async def loaded() -> bool:
                    return all(len(f.events) >= 10 for f in followers) and any(
                        p["status"] == 200 for p in probes
                    )

                await until(loaded)
                stopped_at = time.monotonic()
                await asyncio.to_thread(cluster.stop)
                down_at = time.monotonic()
                await asyncio.sleep(OUTAGE_SECONDS)
                starting_at = time.monotonic()
                await asyncio.to_thread(cluster.start)
                back_at = time.monotonic()

                # Healed: a probe made after the database was back is answered and ready.
                async def healed() -> bool:
                    return any(
                        p["at"] > back_at and p["status"] == 200 and p["ready"] == 200
                        for p in probes
                    )

                await until(healed, 60)
                stop.set()
                async with asyncio.timeout(60):
                    sent = await asyncio.gather(*produce)
                    await asyncio.gather(*follow_tasks)
                stop_probe.set()
                await probe

            # The log holds exactly what was acknowledged (all of it: every producer's
            # futures resolved), once each, in order; every follower got exactly that.
            for run_id, chunks in zip(run_ids, sent, strict=True):
                log = await stored(http, base, run_id)
                assert [c for _, c in log] == chunks
                assert [s for s, _ in log] == list(range(1, len(chunks) + 1))
                for f in followers:
                    if f.run_id == run_id:
                        assert f.events == log
            # Followers held on through the outage (heartbeats) or resumed after a cut.
            assert all(f.heartbeats > 0 for f in followers)

            during = [p for p in probes if stopped_at < p["at"] < back_at]
            statuses = {p["status"] for p in during}
            assert "timeout" not in {p["status"] for p in probes}, probes
            assert statuses <= {200, 503}, statuses  # never a 500, never a hang
            refused = [p for p in during if p["status"] == 503]
            assert refused, "the outage was never seen"
            for p in refused:
                assert p["body"]["error"]["code"] == "unavailable"
                assert p["retry_after"] is not None and int(p["retry_after"]) >= 1
            # While the database is surely down: refused, not ready, yet alive.
            surely_down = [p for p in probes if down_at < p["at"] and p["end"] < starting_at]
            assert surely_down
            assert {(p["status"], p["ready"], p["health"]) for p in surely_down} == {
                (503, 503, 200)
            }
            after = [p for p in probes if p["at"] > back_at]
            assert after and after[-1]["status"] == 200 and after[-1]["ready"] == 200
            # A refused probe stored nothing: the probe run holds the acknowledged ones only.
            acknowledged = [p for p in probes if p["status"] == 200]
            probe_log = await stored(http, base, "probe")
            assert [c for _, c in probe_log] == [
                chunk("probe", i + 1) for i in range(len(acknowledged))
            ]

            first_503 = min(p["at"] for p in refused) - stopped_at
            recovered = min(p["at"] + p["took"] for p in after if p["status"] == 200) - back_at
            retried = sum(p.retries for p in producers)
            print(
                f"FIGURES outage: first 503 after {first_503:.2f}s, appends back "
                f"{recovered:.2f}s after PostgreSQL accepted connections, "
                f"{retried} producer retries, {sum(len(s) for s in sent)} events"
            )
