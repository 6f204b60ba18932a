"""The AI SDK mapping's cost: UI message chunks pushed with `?format=ai-sdk` against the same
content pushed as the AG-UI events they become, in the same run.

    python ops/bench/ui_mapping.py [--sizes 1,100,1000] [--rounds 3] [--quick] [--json FILE]

One `agent-replay serve` on a scratch database takes, at each size (1, 100 and 1,000 chunks
per request), two workloads in turns (ABAB: the order flips every round, `--rounds N`,
default 3, so the machine's drift meets both):

* `ui`: appends of AI SDK UI message stream chunks (`POST /v1/runs/{id}/events?format=ai-sdk`),
  a JSON body each, which the service maps into AG-UI events (`agent_replay.ingest.ui_chunks`,
  with the run's earlier parts read back when an append starts one) before storing them;
* `agui` (the baseline): the very events that mapping gives for the same chunks, made here
  by the same mapper before the phase, one request per UI request, pushed as AG-UI events.

Both store the same events, so events/s and CPU per event (the server's and its PostgreSQL
backends', from /proc) are counted per stored event; the script checks that both sides
stored the same number. The content is an assistant's answer as `streamText` streams it: per
40 chunks, a text part (start, 28 deltas of 1-4 words, end), then a tool call whose input
streams in 7 fragments and ends `tool-input-available`; a run is one answer of 2,000 chunks
(a producer goes on in a fresh run), as a chat's are, so the read-back of a run's parts stays
bounded as it does in use. Single chunks come from 50 producers, larger requests from 4, each
producer sending its runs' requests in order and waiting on each.

Prints per size and round both sides' events/s, p50/p99 latency and CPU per event, and
ui ÷ agui; then the medians. `--json FILE` writes {"sizes", "rounds", "phases": {size:
{"ui", "agui": [{"events_per_s", "p50_ms", "p99_ms", "cpu_us", "db_cpu_us"} per round],
"events_per_s_ratio", "cpu_us_ratio", "db_cpu_us_ratio": [ui ÷ agui per round],
"median": {"events_per_s_ratio", "cpu_us_ratio", "db_cpu_us_ratio"}}}}. `--quick`: one round
of few requests, a smoke run whose figures mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import asyncpg
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    RawPoster,
    backends,
    checkpoint,
    cpu_seconds,
    pct,
    scratch_database,
    server_process,
    write_json,
)

from agent_replay.ingest.ui_chunks import UIChunkMapper
from agent_replay.workers import tune_collector

RUN_CHUNKS = 2_000  # an answer: a run
TOTALS = {1: 10_000, 100: 100_000, 1000: 200_000}
QUICK_TOTALS = {1: 400, 100: 4_000, 1000: 8_000}
_WORDS = str.split(
    "the of and to in is that for it as was with be by on not this are or from at which "
    "database commit latency replay stream agent token model tool search result answer "
    "function argument durable event offset cursor resume browser tab session user"
)


def ui_chunk(i: int) -> dict[str, Any]:
    """UI chunk `i` of a run: a text part then a tool call per 40 (deterministic in `i`)."""
    rng = random.Random(i)
    block, at = divmod(i, 40)
    text, call = f"text-{block}", f"call-{block}"
    if at == 0:
        return {"type": "text-start", "id": text}
    if at < 29:
        words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        return {"type": "text-delta", "id": text, "delta": words + " "}
    if at == 29:
        return {"type": "text-end", "id": text}
    if at == 30:
        return {"type": "tool-input-start", "toolCallId": call, "toolName": "search_docs"}
    arguments = json.dumps({"query": f"q{block}", "limit": block % 50, "filters": {"y": 2026}})
    if at < 38:
        part = len(arguments) // 7
        piece = arguments[(at - 31) * part : (at - 30) * part if at < 37 else None]
        return {"type": "tool-input-delta", "toolCallId": call, "inputTextDelta": piece}
    if at == 38:
        return {"type": "tool-input-available", "toolCallId": call, "toolName": "search_docs",
                "input": json.loads(arguments)}  # fmt: skip
    return {"type": "data-progress", "data": {"block": block}}


Request = tuple[str, bytes]  # path, body


def workload(
    size: int, total: int, producers: int
) -> tuple[dict[str, list[list[Request]]], int, str]:
    """Per side ("ui", "agui"), each producer's requests in order; the events stored; and
    the tag its run ids hold (`<side>-<tag>-...`).

    Each producer writes `total / producers` chunks as runs of RUN_CHUNKS, `size` a request.
    The AG-UI side's requests hold what the mapper makes of the UI side's, run by run
    (a mapper per run, fed the run's chunks in order, as the service's mapping is)."""
    tag = uuid.uuid4().hex[:6]
    sides: dict[str, list[list[Request]]] = {"ui": [], "agui": []}
    stored = 0
    per_producer = total // producers
    for p in range(producers):
        ui_requests: list[Request] = []
        agui_requests: list[Request] = []
        for r, first in enumerate(range(0, per_producer, RUN_CHUNKS)):
            ui_run, agui_run = f"ui-{tag}-{size}-{p}-{r}", f"agui-{tag}-{size}-{p}-{r}"
            mapper = UIChunkMapper(agui_run, agui_run)
            count = min(RUN_CHUNKS, per_producer - first)
            for at in range(0, count, size):
                chunks = [ui_chunk(i) for i in range(at, min(at + size, count))]
                events = [e for i, c in enumerate(chunks) for e in mapper.feed(c, i)]
                stored += len(events)
                ui_requests.append(
                    (f"/v1/runs/{ui_run}/events?format=ai-sdk", orjson.dumps({"events": chunks}))
                )
                agui_requests.append(
                    (f"/v1/runs/{agui_run}/events", orjson.dumps({"events": events}))
                )
        sides["ui"].append(ui_requests)
        sides["agui"].append(agui_requests)
    return sides, stored, tag


async def push(port: int, requests: list[list[Request]]) -> tuple[float, list[float]]:
    """Each producer's requests in order, a connection each; seconds taken, latencies (ms)."""
    poster = RawPoster(port, connections=len(requests))
    await poster.open()
    latencies: list[float] = []

    async def producer(mine: list[Request]) -> None:
        for path, body in mine:
            t0 = time.perf_counter()
            await poster.post(path, body)
            latencies.append((time.perf_counter() - t0) * 1000)

    tune_collector()
    gc.freeze()
    try:
        start = time.perf_counter()
        await asyncio.gather(*(producer(mine) for mine in requests))
        return time.perf_counter() - start, latencies
    finally:
        gc.unfreeze()
        await poster.close()


async def stored_events(url: str, prefix: str) -> int:
    conn = await asyncpg.connect(url)
    try:
        total = await conn.fetchval(
            "SELECT coalesce(sum(last_seq), 0) FROM runs WHERE starts_with(run_id, $1)", prefix
        )
        return int(total)
    finally:
        await conn.close()


def server_pid(base: str) -> int:
    with urllib.request.urlopen(base + "/healthz", timeout=10) as answer:
        pid: int = json.load(answer)["pid"]
        return pid


def phase(
    url: str, base: str, requests: list[list[Request]], events: int, prefix: str
) -> dict[str, float]:
    """One side's workload at one size: events/s, latency, CPU per stored event (µs)."""
    asyncio.run(checkpoint(url))
    database = url.rsplit("/", 1)[1]
    pid = server_pid(base)
    server, db = cpu_seconds([pid]), cpu_seconds(backends(database))
    seconds, latencies = asyncio.run(push(int(base.rsplit(":", 1)[1]), requests))
    figures = {
        "events_per_s": events / seconds,
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "cpu_us": (cpu_seconds([pid]) - server) / events * 1e6,
        "db_cpu_us": (cpu_seconds(backends(database)) - db) / events * 1e6,
    }
    found = asyncio.run(stored_events(url, prefix))
    if found != events:
        raise RuntimeError(f"{prefix}: {found} events stored, {events} expected")
    return figures


def show(size: int, side: str, f: dict[str, float]) -> str:
    return (
        f"  {size:>5} chunks  {side:<4}  {f['events_per_s']:>10,.0f} events/s  "
        f"p50 {f['p50_ms']:6.2f} ms  p99 {f['p99_ms']:7.2f} ms  "
        f"server {f['cpu_us']:6.2f} µs/event  PostgreSQL {f['db_cpu_us']:6.2f} µs/event"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1,100,1000", help="chunks per request")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per size (default 3)")
    parser.add_argument("--quick", action="store_true", help="one round of few requests")
    parser.add_argument("--json", help="write the figures and ratios here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rounds = 1 if args.quick else args.rounds
    totals = QUICK_TOTALS if args.quick else TOTALS
    report: dict[str, Any] = {"sizes": sizes, "rounds": rounds, "phases": {}}
    with scratch_database() as url, server_process(url) as base:
        for size in sizes:
            producers = 50 if size == 1 else 4
            total = totals.get(size, 100 * size)
            rows: dict[str, list[dict[str, float]]] = {"ui": [], "agui": []}
            for r in range(rounds):
                work, events, tag = workload(size, total, producers)
                order = ("ui", "agui") if r % 2 == 0 else ("agui", "ui")
                for side in order:
                    figures = phase(url, base, work[side], events, f"{side}-{tag}-")
                    rows[side].append(figures)
                    print(show(size, side, figures), flush=True)
            ratios = {
                f"{key}_ratio": [
                    u[key] / a[key] for u, a in zip(rows["ui"], rows["agui"], strict=True)
                ]
                for key in ("events_per_s", "cpu_us", "db_cpu_us")
            }
            median = {key: statistics.median(values) for key, values in ratios.items()}
            report["phases"][str(size)] = {**rows, **ratios, "median": median}
            print(
                f"  {size:>5} chunks  ui ÷ agui: events/s {median['events_per_s_ratio']:.2f}, "
                f"server CPU per event {median['cpu_us_ratio']:.2f}, "
                f"PostgreSQL CPU per event {median['db_cpu_us_ratio']:.2f}  (rounds: "
                + ", ".join(f"{v:.2f}" for v in ratios["cpu_us_ratio"])
                + ")",
                flush=True,
            )
    write_json(args.json, report)


if __name__ == "__main__":
    main()
