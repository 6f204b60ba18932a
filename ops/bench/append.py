"""Append throughput and acknowledgement latency, against raw asyncpg in the same run.

    python ops/bench/append.py [--quick]

Prints events/s for batches of 1, 10, 100 and 1,000 chunks (each producer on
its own run; for batches of 1 also all producers on one run): over HTTP (a
`replay serve` process on loopback), through the in-process writer, and for
the baseline, raw asyncpg inserting the same rows with one transaction per
batch (unnest and COPY; the faster is the baseline). Batch size 1 runs with
50 concurrent producers, as producers of single chunks do. Commits are
durable (synchronous_commit=on, the server default; checked below).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp
import asyncpg
import orjson
from common import pct, scratch_database, server_process

from service.log import EventLog

PRODUCERS_SINGLE = 50


def chunk(i: int) -> dict[str, object]:
    return {
        "type": "TEXT_MESSAGE_CONTENT",
        "messageId": "msg-1",
        "delta": f"token {i} of the answer, ",
    }


def batches(total: int, size: int) -> list[list[dict[str, object]]]:
    return [[chunk(i + j) for j in range(size)] for i in range(0, total, size)]


async def drive(
    producers: int,
    work: list[list[dict[str, object]]],
    send: Callable[[int, list[dict[str, object]]], Awaitable[None]],
) -> tuple[float, list[float]]:
    """Run `work` across `producers` tasks; return events/s and per-append latencies (ms)."""
    queue = list(enumerate(work))
    latencies: list[float] = []
    events = sum(len(b) for b in work)

    async def producer(p: int) -> None:
        while queue:
            _, batch = queue.pop()
            t0 = time.perf_counter()
            await send(p, batch)
            latencies.append((time.perf_counter() - t0) * 1000)

    start = time.perf_counter()
    await asyncio.gather(*(producer(p) for p in range(producers)))
    return events / (time.perf_counter() - start), latencies


# Raw asyncpg: the ceiling. Same rows, same columns, one transaction per batch,
# the run row bumped like the service does.
UNNEST = """
INSERT INTO events (run_id, seq, type, chunk, message_id, tool_call_id)
SELECT $1, s, t, c, m, NULL
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(s, t, c, m)
"""


async def raw_baseline(url: str, size: int, total: int, method: str) -> tuple[float, list[float]]:
    producers = PRODUCERS_SINGLE if size == 1 else 4
    pool = await asyncpg.create_pool(url, min_size=producers, max_size=producers)
    runs = [f"raw-{method}-{size}-{p}" for p in range(producers)]
    async with pool.acquire() as conn:
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in runs])
    work = batches(total, size)

    async def send(p: int, batch: list[dict[str, object]]) -> None:
        texts = [orjson.dumps(c).decode() for c in batch]
        async with pool.acquire() as conn, conn.transaction():
            last = await conn.fetchval(
                "UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq",
                runs[p],
                len(batch),
            )
            seqs = list(range(last - len(batch) + 1, last + 1))
            if method == "copy":
                await conn.copy_records_to_table(
                    "events",
                    records=[
                        (runs[p], s, "TEXT_MESSAGE_CONTENT", t, "msg-1", None)
                        for s, t in zip(seqs, texts, strict=True)
                    ],
                    columns=["run_id", "seq", "type", "chunk", "message_id", "tool_call_id"],
                )
            else:
                await conn.execute(
                    UNNEST,
                    runs[p],
                    seqs,
                    ["TEXT_MESSAGE_CONTENT"] * len(batch),
                    texts,
                    ["msg-1"] * len(batch),
                )

    try:
        return await drive(producers, work, send)
    finally:
        await pool.close()


async def writer_bench(
    url: str, size: int, total: int, *, one_run: bool = False
) -> tuple[float, list[float]]:
    producers = PRODUCERS_SINGLE if size == 1 else 4
    async with EventLog.connect(url) as log:
        # Each producer its own run (agents streaming side by side), or all on
        # one run (many producers feeding one log).
        tag = "one" if one_run else "own"
        runs = [f"writer-{tag}-{size}-{0 if one_run else p}" for p in range(producers)]

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            await log.append(runs[p], batch)

        return await drive(producers, batches(total, size), send)


async def http_bench(base: str, size: int, total: int) -> tuple[float, list[float]]:
    # aiohttp rather than httpx: httpx's async client costs ~10x more CPU per
    # request here, and on 2 cores the client would be what is measured.
    producers = PRODUCERS_SINGLE if size == 1 else 4
    connector = aiohttp.TCPConnector(limit=producers)
    async with aiohttp.ClientSession(base, connector=connector) as client:
        runs = [f"http-{size}-{p}" for p in range(producers)]
        headers = {"Content-Type": "application/json"}

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            body = orjson.dumps({"events": batch})
            async with client.post(f"/v1/runs/{runs[p]}/events", data=body, headers=headers) as r:
                await r.read()
                r.raise_for_status()

        # Warm the connections and create the runs outside the timing.
        await asyncio.gather(*(send(p, [chunk(0)]) for p in range(producers)))
        return await drive(producers, batches(total, size), send)


def line(label: str, rate: float, lat: list[float], base: float | None) -> str:
    ratio = f"{rate / base:6.1%} of raw" if base else ""
    p50, p99 = pct(lat, 50), pct(lat, 99)
    return f"  {label:<28} {rate:>10,.0f} ev/s   p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  {ratio}"


async def check_durable(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        sync = await conn.fetchval("SHOW synchronous_commit")
        return f"synchronous_commit={sync}, fsync={await conn.fetchval('SHOW fsync')}"
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer events (a smoke run)")
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    totals = {
        1: int(20_000 * scale),
        10: int(50_000 * scale),
        100: int(200_000 * scale),
        1000: int(400_000 * scale),
    }
    with scratch_database() as url:
        print(f"append benchmark ({asyncio.run(check_durable(url))})")
        results: dict[int, dict[str, tuple[float, list[float]]]] = {}
        for size, total in totals.items():
            results[size] = {
                "unnest": asyncio.run(raw_baseline(url, size, total, "unnest")),
                "copy": asyncio.run(raw_baseline(url, size, total, "copy")),
                "writer": asyncio.run(writer_bench(url, size, total)),
            }
            if size == 1:
                results[size]["writer-one"] = asyncio.run(
                    writer_bench(url, size, total, one_run=True)
                )
        with server_process(url) as base:
            for size, total in totals.items():
                results[size]["http"] = asyncio.run(http_bench(base, size, total))
        for size in totals:
            r = results[size]
            raw = max(r["unnest"][0], r["copy"][0])
            producers = PRODUCERS_SINGLE if size == 1 else 4
            print(f"batch of {size} ({producers} concurrent producers, {totals[size]:,} events)")
            print(line("raw asyncpg unnest", *r["unnest"], None))
            print(line("raw asyncpg COPY", *r["copy"], None))
            print(line("in-process writer", *r["writer"], raw))
            if "writer-one" in r:
                print(line("in-process, all on one run", *r["writer-one"], raw))
            print(line("HTTP POST /events", *r["http"], raw))


if __name__ == "__main__":
    main()
