"""Failover: the primary dies (SIGKILL, a lost host) under load and its synchronous standby
is promoted. The service is given both hosts in one DSN with
`target_session_attrs=read-write`, so its pools and its LISTEN connection find whichever
is the primary now. Producers retry (agent_replay.client), followers
resume; the log on the new primary holds exactly the acknowledged events once, in order,
and every follower got exactly that.

Synchronous replication is what makes this promise hold: with it, PostgreSQL acknowledges
a commit only once the standby has flushed it, so nothing acknowledged is missing from the
promoted standby. With asynchronous replication a commit acknowledged just before the crash
may never have reached the standby, and the promoted log would lack it.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from typing import IO

import httpx

from agent_replay import migrate
from agent_replay.client import Producer, RetryPolicy
from tests.faults.conftest import (
    DATABASE,
    Follower,
    chunk,
    closing,
    following,
    produce_until,
    replica,
    stored,
    until,
)
from tests.ops.scrape import scrape, value
from tests.support.cluster import Cluster

RUNS = 4
FOLLOWERS_PER_RUN = 2


def psql(pg: Cluster, sql: str, database: str = "postgres") -> str:
    done = subprocess.run(
        [str(pg.bin / "psql"), "-X", "-q", "-At", "-h", "127.0.0.1", "-p", str(pg.port),
         "-U", "postgres", "-d", database, "-c", sql],
        check=True, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    return done.stdout.strip()


def failover_dsn(primary: Cluster, standby: Cluster) -> str:
    """Both hosts, in the order tried; only one that accepts writes is taken."""
    return (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/{DATABASE}"
        "?target_session_attrs=read-write"
    )


async def test_primary_killed_and_sync_standby_promoted_then_log_and_readers_hold_acked_once(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    standby = await asyncio.to_thread(cluster.standby)
    # Synchronous from here on: a commit is acknowledged once the standby has flushed it.
    # (The standby's own copy of the settings has none: promoted alone, it must not wait
    # for a standby it does not have.)
    await asyncio.to_thread(psql, cluster, "ALTER SYSTEM SET synchronous_standby_names = '*'")
    await asyncio.to_thread(psql, cluster, "SELECT pg_reload_conf()")

    async def synchronous() -> bool:
        state = await asyncio.to_thread(
            psql, cluster, "SELECT string_agg(sync_state, ',') FROM pg_stat_replication"
        )
        return state == "sync"

    await until(synchronous)
    dsn = failover_dsn(cluster, standby)
    # Producers write through A; followers read through B as well, where only B's LISTEN
    # connection (no slow re-check within the test's span) tells it of A's appends.
    env = {"REPLAY_STREAM_RECHECK_SECONDS": "120"}
    run_ids = [f"failover-{i}" for i in range(RUNS)]
    with replica(dsn, server_log, **env) as (a, _), replica(dsn, server_log, **env) as (b, _):
        async with httpx.AsyncClient(timeout=30) as http:
            for run_id in run_ids:
                assert (
                    await http.put(
                        f"{a}/v1/runs/{run_id}", headers={"Content-Type": "application/json"}
                    )
                ).status_code == 201
            followers = [
                Follower([a if k % 2 == 0 else b], r, ndjson=k % 2 == 1)
                for r in run_ids
                for k in range(FOLLOWERS_PER_RUN)
            ]
            stop = asyncio.Event()
            producers = [Producer(a, r, policy=RetryPolicy(give_up_after=90)) for r in run_ids]
            async with closing(producers), following(http, followers) as follow_tasks:
                produce = [
                    asyncio.create_task(produce_until(p, r, stop))
                    for p, r in zip(producers, run_ids, strict=True)
                ]

                async def all_following() -> bool:
                    return all(len(f.events) >= 20 for f in followers)

                await until(all_following)
                acked_before = [len(await stored(http, a, r)) for r in run_ids]
                killed_at = time.monotonic()
                await asyncio.to_thread(cluster.kill)
                await asyncio.to_thread(standby.promote)
                promoted_at = time.monotonic()

                async def appends_again() -> bool:
                    try:
                        r = await http.post(
                            f"{a}/v1/runs/failover-probe/events",
                            json={"events": [chunk("probe", 1)]},
                            timeout=5,
                        )
                    except httpx.TransportError:
                        return False
                    assert r.status_code in (200, 503), r.text
                    return r.status_code == 200

                await until(appends_again, 60)
                recovered_at = time.monotonic()
                # Some more appends on the new primary, then every producer closes its run.
                grown = [len(await stored(http, a, r)) + 50 for r in run_ids]

                async def appended_after() -> bool:
                    now = [len(await stored(http, a, r)) for r in run_ids]
                    return all(n >= g for n, g in zip(now, grown, strict=True))

                await until(appended_after)
                stop.set()
                async with asyncio.timeout(90):
                    sent = await asyncio.gather(*produce)
                    await asyncio.gather(*follow_tasks)
            listening = [await _listening(a), await _listening(b)]
            logs = {r: await stored(http, b, r) for r in run_ids}
        # The service now writes to the promoted standby.
        assert await asyncio.to_thread(psql, standby, "SELECT pg_is_in_recovery()") == "f"
        # Migrations take the same URL (an upgrade at head is a no-op, still connecting).
        await asyncio.to_thread(migrate.upgrade, dsn)
        assert await migrate.current_revision(dsn) == migrate.head_revision()

    for run_id, chunks in zip(run_ids, sent, strict=True):
        log = logs[run_id]
        # Every acknowledged chunk (all of them: close_run returned), once, in order.
        assert [c for _, c in log] == chunks
        assert [s for s, _ in log] == list(range(1, len(chunks) + 1))
        for f in followers:
            if f.run_id == run_id:
                assert f.events == log
    assert all(n > 0 for n in acked_before)
    # Followers held on (heartbeats) or resumed; those on B were woken by B's LISTEN
    # connection, which found the new primary by itself.
    assert all(f.heartbeats > 0 for f in followers)
    assert listening == [1.0, 1.0]
    retried = sum(p.retries for p in producers)
    assert retried > 0, "the failover was never seen by a producer"
    print(
        f"FIGURES failover: primary killed, standby promoted in {promoted_at - killed_at:.2f}s; "
        f"appends back {recovered_at - promoted_at:.2f}s after the promotion; "
        f"{retried} producer retries; {sum(len(s) for s in sent)} events, none lost"
    )


async def _listening(base: str) -> float:
    async with httpx.AsyncClient(base_url=base, timeout=10) as direct:
        return value(await scrape(direct), "replay_listen_connected")
