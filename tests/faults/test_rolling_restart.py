"""A rolling restart: SIGTERM to one of two replicas while 50 clients follow runs through
both and producers append through both. The replica stops accepting, ends its streams
cleanly, finishes the appends in flight and exits within its grace period; every client
resumes on the other replica and ends with every event exactly once."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from typing import IO, Any

import httpx

from service.client import Producer, RetryPolicy
from tests.cluster import Cluster
from tests.faults.conftest import (
    Follower,
    chunk,
    closing,
    following,
    replica,
    stored,
    until,
)

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
                assert (await http.put(f"{b}/v1/runs/{run_id}")).status_code == 201
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
