"""Hosted-run driver overhead: upstream → durable append → SSE client, vs the upstream alone.

    python ops/bench/driver.py [--events 10000] [--rate 1000] [--json FILE]

An upstream process streams AG-UI events. Printed, in one run:
- throughput: the upstream emitting N events as fast as it can, read alone
  by a client, then through the service (a hosted run: the driver reads the
  upstream, appends every event durably, and an SSE client follows the run
  live), events/s from the start request to the last event received, and
  the ratio;
- latency while a client follows live: the upstream paced at --rate
  events/s, from the upstream sending an event to the client receiving it
  through the service (p50/p99).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
from common import free_port, pct, scratch_database, server_process, write_json

HERE = Path(__file__).resolve().parent
Received = list[tuple[float, dict[str, object]]]


async def _sse_events(response: aiohttp.ClientResponse) -> Received:
    """(receive time, chunk) for every `data:` line."""
    received: Received = []
    buffer = b""
    async for data in response.content.iter_any():
        now = time.time()
        buffer += data
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line.startswith(b"data: "):
                received.append((now, json.loads(line[6:])))
    return received


async def upstream_alone(url: str) -> tuple[float, int]:
    async with aiohttp.ClientSession() as http:
        start = time.perf_counter()
        async with http.post(url, json={"runId": "r", "threadId": "t"}) as response:
            events = await _sse_events(response)
        return len(events) / (time.perf_counter() - start), len(events)


async def through_service(base: str, agent: str) -> tuple[float, int, list[float]]:
    async with aiohttp.ClientSession(base) as http:
        start = time.perf_counter()
        async with http.post(f"/v1/agents/{agent}/runs", json={}) as r:
            run_id = (await r.json())["run_id"]
        async with http.get(f"/v1/runs/{run_id}/stream") as response:
            events = await _sse_events(response)
        elapsed = time.perf_counter() - start
    latencies = [(now - float(str(c["sentAt"]))) * 1000 for now, c in events if "sentAt" in c]
    return len(events) / elapsed, len(events), latencies


def _wait_for(url: str) -> None:
    deadline = time.monotonic() + 20
    while True:
        try:
            if asyncio.run(upstream_alone(url + "?count=1"))[1]:
                return
        except aiohttp.ClientError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=1000.0, help="paced events/s for latency")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    port = free_port()
    upstream = subprocess.Popen([sys.executable, str(HERE / "upstream_fast.py"), str(port)])
    url = f"http://127.0.0.1:{port}/agent"
    try:
        _wait_for(url)
        fast = f"{url}?count={args.events}"
        paced = f"{url}?count={int(args.rate * 5)}&rate={args.rate}"
        alone, count = asyncio.run(upstream_alone(fast))
        agents = json.dumps({"fast": fast, "paced": paced})
        with scratch_database() as db, server_process(db, REPLAY_AGENTS=agents) as base:
            asyncio.run(through_service(base, "fast"))  # warm-up
            served, served_count, _ = asyncio.run(through_service(base, "fast"))
            _, paced_count, latencies = asyncio.run(through_service(base, "paced"))
    finally:
        upstream.terminate()
        upstream.wait(10)
    p50, p99 = pct(latencies, 50), pct(latencies, 99)
    print(f"driver benchmark ({args.events:,} upstream events as fast as the upstream can)")
    print(f"  upstream read alone           {alone:>10,.0f} events/s  ({count:,} events)")
    print(
        f"  through the service           {served:>10,.0f} events/s  ({served_count:,} events, "
        f"{served / alone:.0%} of the upstream alone)"
    )
    print(
        f"  live, upstream at {args.rate:,.0f}/s: sent -> client got "
        f"p50 {p50:.1f} ms  p99 {p99:.1f} ms  ({paced_count:,} events)"
    )
    write_json(
        args.json,
        {
            "events": args.events,
            "upstream_alone_events_per_s": alone,
            "through_service_events_per_s": served,
            "through_service_vs_upstream_alone": served / alone,
            "events_received": {"upstream_alone": count, "through_service": served_count},
            "live": {
                "rate": args.rate,
                "p50_ms": p50,
                "p99_ms": p99,
                "events_received": paced_count,
            },
        },
    )


if __name__ == "__main__":
    main()
