"""A rolling restart: SIGTERM to one of two replicas while 50 clients follow runs through
both and producers append through both. The replica stops accepting, ends its streams
cleanly, finishes the appends in flight and exits within its grace period; every client
resumes on the other replica and ends with every event exactly once."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from typing import IO, Any

import httpx

from agent_replay.client import Producer, RetryPolicy
from tests.faults.agents import PACED_DELTAS
from tests.faults.conftest import (
    Follower,
    chunk,
    closing,
    following,
    replica,
    stored,
    until,
)
from tests.ops.scrape import scrape, value
from tests.support.cluster import Cluster
from tests.support.proxy import nginx_in_front

RUNS = 10
FOLLOWERS_PER_RUN = 5
CHUNKS_PER_RUN = 300
GRACE_SECONDS = 10


async def _produce(producer: Producer, run_id: str) -> list[Any]:
    sent = []
    for n in range(1, CHUNKS_PER_RUN + 1):
        c = chunk(run_id, n)
        producer.submit(c)
        sent.append(c)
        await asyncio.sleep(0.01)
    await producer.close_run()
    return sent


async def test_sigterm_to_one_of_two_replicas_then_every_client_gets_every_event_once(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    env = {"REPLAY_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS)}
    with (
        replica(database, server_log, **env) as (a, proc_a),
        replica(database, server_log, **env) as (b, _),
    ):
        run_ids = [f"roll-{i}" for i in range(RUNS)]
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(timeout=30, limits=limits) as http:
            for run_id in run_ids:
                assert (
                    await http.put(
                        f"{b}/v1/runs/{run_id}", headers={"Content-Type": "application/json"}
                    )
                ).status_code == 201
            # Half the clients start on A, half on B; producers too.
            followers = [
                Follower([a, b] if k % 2 == 0 else [b, a], run_id)
                for run_id in run_ids
                for k in range(FOLLOWERS_PER_RUN)
            ]
            producers = [
                Producer([a, b] if i % 2 == 0 else [b, a], r, policy=RetryPolicy(give_up_after=60))
                for i, r in enumerate(run_ids)
            ]
            async with closing(producers), following(http, followers) as tasks:
                produce = [
                    asyncio.create_task(_produce(p, r))
                    for p, r in zip(producers, run_ids, strict=True)
                ]

                async def all_following() -> bool:
                    return all(f.events for f in followers)

                await until(all_following)
                terminated = time.monotonic()
                proc_a.send_signal(signal.SIGTERM)
                try:
                    code = await asyncio.to_thread(proc_a.wait, GRACE_SECONDS + 10)
                except subprocess.TimeoutExpired:
                    raise AssertionError("the replica outlived its grace period") from None
                shutdown = time.monotonic() - terminated
                async with asyncio.timeout(60):
                    sent = await asyncio.gather(*produce)
                    await asyncio.gather(*tasks)
            for run_id, chunks in zip(run_ids, sent, strict=True):
                log = await stored(http, b, run_id)
                assert [c for _, c in log] == chunks
                assert [s for s, _ in log] == list(range(1, len(chunks) + 1))
                for f in followers:
                    if f.run_id == run_id:
                        assert f.events == log  # every event, exactly once, in order
    # Graceful: uvicorn re-raises the SIGTERM it handled once it has shut down.
    assert code in (0, -signal.SIGTERM)
    moved = [f for f in followers if f.bases[0] == a]
    assert all(f.connects >= 2 for f in moved)  # each resumed, on B
    assert [f.broken for f in moved] == [0] * len(moved)  # A ended its streams cleanly
    retried = sum(p.retries for p in producers)
    print(
        f"FIGURES rolling restart: replica A exited {shutdown:.2f}s after SIGTERM "
        f"(grace {GRACE_SECONDS}s); {len(moved)} clients resumed on B; "
        f"{retried} producer retries; {RUNS * CHUNKS_PER_RUN} events"
    )


HOSTED_FOLLOWERS = 10


async def _driver_of(replicas: list[tuple[str, subprocess.Popen[bytes]]]) -> int:
    """The index of the replica driving the hosted run (its own /metrics says so)."""
    for i, (base, _) in enumerate(replicas):
        async with httpx.AsyncClient(base_url=base, timeout=10) as direct:
            if value(await scrape(direct), "replay_hosted_runs") == 1:
                return i
    raise AssertionError("no replica drives the run")


async def test_sigterm_behind_nginx_to_a_hosted_runs_replica_then_interrupted_and_all_end(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    env = {
        "REPLAY_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
        # Without the drain, which test_drain.py tests: the run cannot outlive its replica.
        "REPLAY_DRAIN_SECONDS": "0",
        "REPLAY_AGENTS": json.dumps({"paced": "python:tests.faults.agents:paced"}),
        "REPLAY_METRICS_PUBLIC": "true",
    }
    with (
        replica(database, server_log, **env) as first,
        replica(database, server_log, **env) as second,
        nginx_in_front(
            [first[0].removeprefix("http://"), second[0].removeprefix("http://")]
        ) as proxy,
    ):
        replicas = [first, second]
        async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=50)) as http:
            r = await http.post(f"{proxy}/v1/agents/paced/runs", json={"threadId": "t-roll"})
            assert r.status_code == 201, r.text
            run_id = r.json()["run_id"]
            followers = [
                Follower([proxy], run_id, ndjson=k % 2 == 1) for k in range(HOSTED_FOLLOWERS)
            ]
            async with following(http, followers) as tasks:

                async def all_following() -> bool:
                    return all(len(f.events) >= 10 for f in followers)

                await until(all_following)
                driving = await _driver_of(replicas)
                proc = replicas[driving][1]
                other = replicas[1 - driving][0]
                terminated = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                try:
                    code = await asyncio.to_thread(proc.wait, GRACE_SECONDS + 10)
                except subprocess.TimeoutExpired:
                    raise AssertionError("the replica outlived its grace period") from None
                shutdown = time.monotonic() - terminated
                async with asyncio.timeout(60):
                    await asyncio.gather(*tasks)
            run = (await http.get(f"{other}/v1/runs/{run_id}")).json()
            log = await stored(http, other, run_id)

    assert code in (0, -signal.SIGTERM)
    assert shutdown < GRACE_SECONDS
    # As the README says: a hosted run's upstream stream cannot move to another process, so
    # the replica going away closes it `interrupted`, and every reader ends.
    assert (run["status"], run["closed"]) == ("interrupted", True)
    last = log[-1][1]
    assert (last["type"], last["code"]) == ("RUN_ERROR", "interrupted")
    deltas = [c["delta"] for _, c in log if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == [f"<{n}>" for n in range(1, len(deltas) + 1)]  # a prefix, no gap
    assert 10 <= len(deltas) < PACED_DELTAS
    assert [s for s, _ in log] == list(range(1, len(log) + 1))
    for f in followers:
        assert f.events == log  # every event, exactly once, in order
    # Those the stopping replica served saw their stream end cleanly and resumed through
    # nginx on the other one.
    assert any(f.connects >= 2 for f in followers)
    assert [f.broken for f in followers] == [0] * len(followers)
    print(
        f"FIGURES rolling restart behind nginx: the driving replica exited {shutdown:.2f}s "
        f"after SIGTERM (grace {GRACE_SECONDS}s); hosted run {run['status']} after "
        f"{len(deltas)} of {PACED_DELTAS} deltas; {HOSTED_FOLLOWERS} followers through nginx "
        f"ended with all {len(log)} events once ({sum(f.connects for f in followers)} "
        f"stream connections)"
    )
