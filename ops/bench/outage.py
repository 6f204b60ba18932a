"""PostgreSQL outages under load: how fast appends are refused, how fast they come back.

    python ops/bench/outage.py [--rounds 3] [--outage 6] [--producers 4] [--json FILE]

Starts a private PostgreSQL cluster (tests/support/cluster.py: never the shared server,
which must not be stopped) and one `agent-replay serve` on it. `--producers` runs
each get a `agent_replay.client.Producer` submitting one chunk every 10 ms, and a
probe appends one chunk (with `expected_seq`) every 50 ms and times each
answer. Each round stops PostgreSQL (`pg_ctl stop -m fast`) for `--outage`
seconds, starts it again and waits for appends to be stored. Per round:

- first_503_s: from `pg_ctl stop` beginning to the first 503 answered;
- recover_s: from PostgreSQL accepting connections (`pg_ctl start -w` returned)
  to the first append stored after it, also as a ratio against the healthy
  probe append's p50 measured in the same run before the first outage;
- retried: the producers' repeated attempts in the round (each one the same
  batch at the same `expected_seq`).

The machine's load average (`os.getloadavg()`) before and after is printed with the
figures: on a loaded machine the times stretch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
from common import pct, server_process

from agent_replay import migrate
from agent_replay.client import Producer, RetryPolicy
from tests.support.cluster import Cluster, running_cluster

DATABASE = "replay"


def _database(pg: Cluster) -> str:
    url = pg.create_database(DATABASE)
    migrate.upgrade(url)
    return url


class Probe:
    """One chunk at a time on its own run, each answer kept as (started, answered, status)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.answers: list[tuple[float, float, int]] = []
        self.seq = 1

    async def run(self, stop: asyncio.Event) -> None:
        async with httpx.AsyncClient(base_url=self.base, timeout=10) as http:
            while not stop.is_set():
                started = time.monotonic()
                body = {
                    "events": [{"type": "CUSTOM", "name": "probe", "value": self.seq}],
                    "expected_seq": self.seq,
                }
                try:
                    status = (await http.post("/v1/runs/probe/events", json=body)).status_code
                except httpx.TransportError:
                    status = 0
                if status == 200:
                    self.seq += 1
                self.answers.append((started, time.monotonic(), status))
                await asyncio.sleep(0.05)

    def first(self, status: int, after: float) -> float | None:
        return next((done for _, done, s in self.answers if s == status and done > after), None)


async def _produce(producer: Producer, stop: asyncio.Event) -> int:
    sent = 0
    while not stop.is_set():
        sent += 1
        producer.submit({"type": "CUSTOM", "name": "n", "value": sent})
        await asyncio.sleep(0.01)
    await producer.flush()
    return sent


async def _bench(pg: Cluster, base: str, args: argparse.Namespace) -> dict[str, Any]:
    stop, stop_probe = asyncio.Event(), asyncio.Event()
    probe = Probe(base)
    producers = [
        Producer(base, f"outage-{i}", policy=RetryPolicy(give_up_after=120), next_seq=1)
        for i in range(args.producers)
    ]
    probing = asyncio.create_task(probe.run(stop_probe))
    producing = [asyncio.create_task(_produce(p, stop)) for p in producers]
    await asyncio.sleep(3)  # healthy: the baseline
    healthy = [done - started for started, done, s in probe.answers if s == 200]
    baseline = pct(healthy, 50)
    rounds = []
    for _ in range(args.rounds):
        retries_before = sum(p.retries for p in producers)
        stopping = time.monotonic()
        await asyncio.to_thread(pg.stop)
        await asyncio.sleep(args.outage)
        await asyncio.to_thread(pg.start)
        accepting = time.monotonic()
        while probe.first(200, accepting) is None:  # noqa: ASYNC110 (another task's answers)
            await asyncio.sleep(0.05)
        await asyncio.sleep(2)  # the producers catch up before the next round
        first_503 = probe.first(503, stopping)
        recovered = probe.first(200, accepting)
        assert first_503 is not None and recovered is not None
        rounds.append(
            {
                "first_503_s": round(first_503 - stopping, 3),
                "recover_s": round(recovered - accepting, 3),
                "recover_vs_healthy_append_p50": round((recovered - accepting) / baseline, 1),
                "retried": sum(p.retries for p in producers) - retries_before,
                "refused_probes": sum(
                    1 for s, d, st in probe.answers if st == 503 and s > stopping
                ),
            }
        )
    stop.set()
    sent = await asyncio.gather(*producing)
    stop_probe.set()
    await probing
    for p in producers:
        await p.aclose()
    # Every chunk each producer submitted is in its run once: last_seq counts them.
    async with httpx.AsyncClient(base_url=base, timeout=10) as http:
        for p, n in zip(producers, sent, strict=True):
            last_seq = (await http.get(f"/v1/runs/{p.run_id}")).json()["last_seq"]
            if last_seq != n:
                raise SystemExit(f"run {p.run_id}: {n} chunks acknowledged, {last_seq} stored")
    return {
        "healthy_append_p50_s": round(baseline, 4),
        "events_acknowledged": sum(sent),
        "rounds": rounds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--outage", type=float, default=6.0, help="seconds PostgreSQL is down")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--json", type=Path, help="write the figures here too")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with running_cluster() as pg:
        url = _database(pg)
        with server_process(url, REPLAY_HEARTBEAT_SECONDS="1") as base:
            figures = asyncio.run(_bench(pg, base, args))
    load_after = os.getloadavg()
    figures.update(
        outage_s=args.outage,
        producers=args.producers,
        cores=os.cpu_count(),
        load_average_before=[round(x, 2) for x in load_before],
        load_average_after=[round(x, 2) for x in load_after],
    )
    for i, r in enumerate(figures["rounds"], 1):
        print(
            f"round {i}: first 503 {r['first_503_s']:.2f}s after pg_ctl stop began; appends "
            f"stored {r['recover_s']:.2f}s after PostgreSQL accepted connections "
            f"({r['recover_vs_healthy_append_p50']}x a healthy append's p50); "
            f"{r['retried']} producer retries, {r['refused_probes']} probe appends refused"
        )
    print(
        f"healthy append p50 {figures['healthy_append_p50_s'] * 1000:.1f} ms; "
        f"{figures['events_acknowledged']} events acknowledged, none lost; load average "
        f"{figures['load_average_before'][0]} before, {figures['load_average_after'][0]} after "
        f"on {figures['cores']} cores"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
