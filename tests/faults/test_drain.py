"""The drain on SIGTERM (agent_replay.api.drain), with real `agent-replay serve` processes.

A rolling restart behind nginx (ops/nginx/replay.conf as shipped) that interrupts no run:
each replica, told to stop, refuses starts and new streams (nginx sends them to another),
ends its streams so their clients resume elsewhere, drives its runs to their end, then
exits. And the bound: a run longer than REPLAY_DRAIN_SECONDS ends `interrupted` then.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import subprocess
import time
from typing import IO

import httpx

from tests.faults.agents import PACED_DELTAS, PACED_SECONDS, STEADY_DELTAS, STEADY_SECONDS
from tests.faults.conftest import Follower, following, service_env, stored, until
from tests.ops.scrape import scrape, value
from tests.support.cluster import Cluster
from tests.support.proxy import nginx_in_front
from tests.support.servers import free_port, serve_subprocess

AGENTS = json.dumps(
    {"steady": "python:tests.faults.agents:steady", "paced": "python:tests.faults.agents:paced"}
)
GRACE_SECONDS = 10
# Longer than a run (STEADY_DELTAS * STEADY_SECONDS = 20 s): no run meets the deadline.
DRAIN_SECONDS = 40
RUNS = 20
START_EVERY = 0.5


def _env(database: str, **extra: str) -> dict[str, str]:
    settings = {
        "REPLAY_AGENTS": AGENTS,
        "REPLAY_METRICS_PUBLIC": "true",
        "REPLAY_SHUTDOWN_GRACE_SECONDS": str(GRACE_SECONDS),
        "REPLAY_DRAIN_SECONDS": str(DRAIN_SECONDS),
    }
    return service_env(database, **{**settings, **extra})


async def _hosted(base: str) -> float:
    async with httpx.AsyncClient(base_url=base, timeout=10) as direct:
        return value(await scrape(direct), "replay_hosted_runs")


async def _exit_time(proc: subprocess.Popen[bytes], since: float, bound: float) -> float:
    try:
        code = await asyncio.to_thread(proc.wait, bound)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the replica outlived its bound ({bound:g}s)") from None
    # Graceful: uvicorn re-raises the SIGTERM it handled once it has shut down.
    assert code in (0, -signal.SIGTERM)
    return time.monotonic() - since


async def test_rolling_restart_behind_nginx_during_hosted_runs_then_every_run_finishes_and_every_follower_gets_every_event_once(  # noqa: E501
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    """Replicas A and B behind nginx; 20 runs of 20 s started one every half second (the
    first on A and on B directly, the rest through nginx), each followed through nginx (SSE
    and NDJSON by turns). A fresh replica takes A's
    place and A gets SIGTERM; then the same for B, while A still drains."""
    ports = [free_port() for _ in range(4)]  # A, B, then their replacements
    env = _env(database)
    with contextlib.ExitStack() as stack:

        def replica(port: int) -> tuple[str, subprocess.Popen[bytes]]:
            return stack.enter_context(serve_subprocess(env, port, log_file=server_log))

        a, proc_a = replica(ports[0])
        b, proc_b = replica(ports[1])
        proxy = stack.enter_context(nginx_in_front([f"127.0.0.1:{p}" for p in ports]))
        starts: dict[str, int] = {}
        followers: list[Follower] = []
        limits = httpx.Limits(max_connections=100)
        async with (
            httpx.AsyncClient(timeout=60, limits=limits) as http,
            following(http, followers) as tasks,
        ):

            async def start_all() -> None:
                for i in range(RUNS):
                    run_id = f"drain-{i}"
                    # The first run on each of A and B directly, the rest through nginx:
                    # nginx's round robin, shared with the followers' stream requests, can
                    # give every start to one replica (a start, then a follower's GET, and
                    # so on), and each restart must drain a replica that drives a run (each
                    # lasts 20 s, past both SIGTERMs).
                    to = (a, b)[i] if i < 2 else proxy
                    r = await http.post(
                        f"{to}/v1/agents/steady/runs",
                        json={"runId": run_id, "threadId": f"t-{i}"},
                    )
                    starts[run_id] = r.status_code
                    assert r.status_code == 201, r.text
                    follower = Follower([proxy], run_id, ndjson=i % 2 == 1)
                    followers.append(follower)
                    tasks.append(asyncio.create_task(follower.run(http)))
                    await asyncio.sleep(START_EVERY)  # the client's pace, not a wait

            starting = asyncio.create_task(start_all())

            async def restart(proc: subprocess.Popen[bytes], base: str, port: int) -> float:
                async def driving() -> bool:  # nginx's round robin gave it a start
                    return await _hosted(base) >= 1

                await until(driving)
                await asyncio.to_thread(replica, port)
                terminated = time.monotonic()
                proc.send_signal(signal.SIGTERM)
                return terminated

            async def started(n: int) -> bool:
                return len(starts) >= n

            await until(lambda: started(4))
            terminated_a = await restart(proc_a, a, ports[2])
            await until(lambda: started(RUNS // 2))
            terminated_b = await restart(proc_b, b, ports[3])
            bound = DRAIN_SECONDS + GRACE_SECONDS
            took_a = await _exit_time(proc_a, terminated_a, bound)
            took_b = await _exit_time(proc_b, terminated_b, bound)
            await starting
            async with asyncio.timeout(60):
                await asyncio.gather(*tasks)
            survivor = f"http://127.0.0.1:{ports[2]}"
            for follower in followers:
                run = (await http.get(f"{survivor}/v1/runs/{follower.run_id}")).json()
                assert (run["status"], run["closed"]) == ("finished", True), run
                log = await stored(http, survivor, follower.run_id)
                deltas = [c["delta"] for _, c in log if c["type"] == "TEXT_MESSAGE_CONTENT"]
                assert deltas == [f"<{n}>" for n in range(1, STEADY_DELTAS + 1)]
                assert log[-1][1]["type"] == "RUN_FINISHED"
                assert follower.events == log  # every event, exactly once, in order
                assert follower.broken == 0  # streams ended cleanly, never cut
    assert starts == {f"drain-{i}": 201 for i in range(RUNS)}
    # Each drained its runs to their end, none to the deadline: a run lasts 20 s.
    run_seconds = STEADY_DELTAS * STEADY_SECONDS
    assert took_a < DRAIN_SECONDS and took_b < DRAIN_SECONDS
    moved = sum(f.connects >= 2 for f in followers)
    print(
        f"FIGURES drain behind nginx: {RUNS} runs of {run_seconds:g}s, one started every "
        f"{START_EVERY}s; A exited {took_a:.1f}s after SIGTERM, B {took_b:.1f}s (drain bound "
        f"{DRAIN_SECONDS}s); every run finished; {moved} followers resumed on another replica"
    )


async def test_sigterm_while_a_run_outlasts_the_drain_then_it_is_served_elsewhere_and_ends_interrupted_at_the_deadline(  # noqa: E501
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    drain = 3.0
    env = _env(database, REPLAY_DRAIN_SECONDS=str(drain), REPLAY_DURABLE_LONG_POLL_SECONDS="30")
    with (
        serve_subprocess(env, log_file=server_log) as (a, proc),
        serve_subprocess(env, log_file=server_log) as (b, _),
        nginx_in_front([a.removeprefix("http://"), b.removeprefix("http://")]) as proxy,
    ):
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{a}/v1/agents/paced/runs", json={"runId": "long-1"})
            assert r.status_code == 201, r.text
            created = await http.put(f"{a}/v1/stream/poll-1", content=b"", headers={})
            assert created.status_code == 201, created.text
            follower = Follower([a, b], "long-1")
            async with following(http, [follower]) as tasks:

                async def following_it() -> bool:
                    return len(follower.events) >= 10

                await until(following_it)
                poll = asyncio.create_task(
                    http.get(f"{a}/v1/stream/poll-1", params={"offset": "-1", "live": "long-poll"})
                )

                async def polling() -> bool:  # the run's follower and the long-poll
                    async with httpx.AsyncClient(base_url=a, timeout=10) as direct:
                        return value(await scrape(direct), "replay_stream_runs_followed") >= 2

                await until(polling)
                terminated = time.monotonic()
                proc.send_signal(signal.SIGTERM)

                async def ready_refused() -> bool:
                    return (await http.get(f"{a}/readyz")).status_code == 503

                await until(ready_refused, seconds=drain)
                ready = (await http.get(f"{a}/readyz")).json()
                assert ready["error"]["code"] == "draining"
                # The long-poll waiting on the draining replica answers now, not at 30 s.
                answered = await poll
                assert answered.status_code == 204
                assert time.monotonic() - terminated < drain
                refused = [
                    await http.post(f"{a}/v1/agents/paced/runs", json={"runId": "long-2"}),
                    await http.get(f"{a}/v1/runs/long-1/stream"),
                    await http.get(
                        f"{a}/v1/stream/poll-1", params={"offset": "-1", "live": "long-poll"}
                    ),
                ]
                for answer in refused:
                    assert answer.status_code == 503
                    assert answer.json()["error"]["code"] == "draining"
                    assert answer.headers["Retry-After"] == "1"
                assert (await http.get(f"{a}/v1/runs/long-2")).status_code == 404
                # Through nginx, the same requests go to B: round robin sends some to A
                # first, and nginx tries B on its 503.
                for n in range(3, 7):
                    moved = await http.post(
                        f"{proxy}/v1/agents/paced/runs", json={"runId": f"long-{n}"}
                    )
                    assert moved.status_code == 201, moved.text
                    async with http.stream("GET", f"{proxy}/v1/runs/long-{n}/stream") as follow:
                        assert follow.status_code == 200
                async with httpx.AsyncClient(base_url=b, timeout=10) as direct:
                    assert value(await scrape(direct), "replay_hosted_runs") == 4
                # Other work goes on: an append, a read.
                appended = await http.post(
                    f"{a}/v1/runs/other-1/events", json={"events": [{"type": "RUN_STARTED"}]}
                )
                assert appended.status_code == 200, appended.text
                assert (await http.get(f"{a}/v1/runs/long-1")).status_code == 200
                async with httpx.AsyncClient(base_url=a, timeout=10) as direct:
                    samples = await scrape(direct)
                assert value(samples, "replay_draining") == 1
                assert value(samples, "replay_hosted_runs") == 1
                at_sigterm = len(follower.events)
                took = await _exit_time(proc, terminated, drain + GRACE_SECONDS + 5)
                async with asyncio.timeout(30):
                    await asyncio.gather(*tasks)
            run = (await http.get(f"{b}/v1/runs/long-1")).json()
            log = await stored(http, b, "long-1")
    assert drain <= took < drain + GRACE_SECONDS
    assert (run["status"], run["closed"]) == ("interrupted", True)
    assert (log[-1][1]["type"], log[-1][1]["code"]) == ("RUN_ERROR", "interrupted")
    deltas = [c["delta"] for _, c in log if c["type"] == "TEXT_MESSAGE_CONTENT"]
    assert deltas == [f"<{n}>" for n in range(1, len(deltas) + 1)]
    # Driven through the drain (about drain / PACED_SECONDS more deltas), not to its end.
    assert at_sigterm + drain / PACED_SECONDS / 2 < len(deltas) < PACED_DELTAS
    # Its follower moved to B at once and got everything there, once.
    assert follower.connects >= 2 and follower.broken == 0
    assert follower.events == log


async def test_second_sigterm_while_draining_then_it_stops_at_once_and_the_run_ends_interrupted(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    env = _env(database, REPLAY_DRAIN_SECONDS="60")
    with serve_subprocess(env, log_file=server_log) as (a, proc):
        async with httpx.AsyncClient(timeout=30) as http:
            r = await http.post(f"{a}/v1/agents/paced/runs", json={"runId": "twice-1"})
            assert r.status_code == 201, r.text
            terminated = time.monotonic()
            proc.send_signal(signal.SIGTERM)

            async def draining() -> bool:
                return (await http.get(f"{a}/readyz")).status_code == 503

            await until(draining, seconds=5)
            proc.send_signal(signal.SIGTERM)
            took = await _exit_time(proc, terminated, GRACE_SECONDS + 5)
        with serve_subprocess(env, log_file=server_log) as (b, _):
            async with httpx.AsyncClient(timeout=30) as http:
                run = (await http.get(f"{b}/v1/runs/twice-1")).json()
    assert took < PACED_DELTAS * PACED_SECONDS  # well before the run's own end
    assert (run["status"], run["closed"]) == ("interrupted", True)


async def test_sigterm_to_workers_parent_then_each_worker_drains_its_run_to_its_end(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    env = _env(database)
    run_ids = [f"workers-{i}" for i in range(4)]
    with serve_subprocess(env, log_file=server_log, args=["--workers", "2"]) as (base, proc):
        async with httpx.AsyncClient(timeout=30) as http:
            for run_id in run_ids:  # new connections: both workers get some (not asserted)
                async with httpx.AsyncClient(timeout=30) as fresh:
                    r = await fresh.post(f"{base}/v1/agents/paced/runs", json={"runId": run_id})
                    assert r.status_code == 201, r.text
            terminated = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            took = await _exit_time(proc, terminated, DRAIN_SECONDS + GRACE_SECONDS)
    with serve_subprocess(env, log_file=server_log) as (b, _):
        async with httpx.AsyncClient(timeout=30) as http:
            for run_id in run_ids:
                run = (await http.get(f"{b}/v1/runs/{run_id}")).json()
                assert (run["status"], run["closed"]) == ("finished", True), run
    assert took < DRAIN_SECONDS
