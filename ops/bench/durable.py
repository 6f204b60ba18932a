"""Durable Streams workloads: this service against the reference server, in the same run.

    python ops/bench/durable.py [--quick] [--only append,producer,catch_up,live]
                                [--baseline DIR] [--repeat N] [--json FILE]

Both servers take the same requests over loopback (raw keep-alive HTTP/1.1
for appends, httpx for reads), each on its own streams:

* append: JSON streams, 1 / 10 / 100 / 1,000 messages per POST (AG-UI-sized
  chunks; one stream per producer: 50 producers for single messages, 4 else);
* producer: the same at 1 / 10 / 100 per POST, each POST an idempotent producer's
  (`Producer-Id`, `-Epoch`, `-Seq`), as `@durable-streams/client` sends them;
* catch-up of a closed 100,000-message stream, from `-1` to the end: plain GETs
  following `Stream-Next-Offset`, and one SSE response (time to first byte and
  to the last message);
* live latency: an SSE follower and a long-poll follower on an open stream
  while single messages are appended at a steady rate; each message's latency
  is from just before its POST is sent to its arrival at the follower.

The peer is npm `@durable-streams/server` with its file store (each append
fdatasync'd), started by `ops/bench/peer`; ours is `agent-replay serve` with
PostgreSQL at synchronous_commit=on. Ratios are ours / the peer's (above 1:
ours is faster, or for latencies lower). On a shared machine the figures are
indicative only.

`--baseline DIR` also serves another checkout of this repository (an
earlier commit: `git archive COMMIT | tar -x -C DIR`) on its own scratch
database in the same run, and prints ours / baseline beside ours / peer:
before-and-after figures taken under the same machine load. All servers are
up at once and each workload runs on each in turn; `--repeat N` runs N such
rounds, the order rotating, each printed with the load average it began at.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import orjson
from append import batches, drive, peer_process
from common import RawPoster, pct, scratch_database, server_process

PREFIX = "/v1/stream/"


async def append_phase(
    port: int, size: int, total: int, *, idempotent: bool = False
) -> dict[str, float]:
    """POSTs of `size` messages; `idempotent`: each with `Producer-Id`, `-Epoch` and
    `-Seq` headers, as `@durable-streams/client`'s IdempotentProducer sends them."""
    producers = 50 if size == 1 else 4
    # Made before the connections open: it takes seconds, past the server's keep-alive.
    work = batches(total, size)
    poster = RawPoster(port, connections=producers)
    await poster.open()
    try:
        streams = [
            f"{PREFIX}bench-append-{size}-{uuid.uuid4().hex[:8]}-{p}" for p in range(producers)
        ]
        for stream in streams:
            await poster.request("PUT", stream)
        seqs = [0] * producers

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            extra = ""
            if idempotent:
                extra = (
                    f"Producer-Id: bench-{p}\r\nProducer-Epoch: 0\r\nProducer-Seq: {seqs[p]}\r\n"
                )
                seqs[p] += 1
            await poster.request("POST", streams[p], orjson.dumps(batch), extra)

        rate, latencies = await drive(producers, work, send)
    finally:
        await poster.close()
    return {"messages_per_s": rate, "p50_ms": pct(latencies, 50), "p99_ms": pct(latencies, 99)}


async def fill(port: int, total: int) -> str:
    """A closed JSON stream of `total` messages; returns its path."""
    work = batches(total, 1000)
    poster = RawPoster(port, connections=4)
    await poster.open()
    try:
        path = f"{PREFIX}bench-catchup-{uuid.uuid4().hex[:8]}"
        await poster.request("PUT", path)

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            await poster.post(path, orjson.dumps(batch))

        await drive(1, work, send)
    finally:
        await poster.close()
    async with httpx.AsyncClient() as http:
        closed = await http.post(
            f"http://127.0.0.1:{port}{path}", headers={"Stream-Closed": "true"}
        )
        assert closed.status_code == 204, closed.status_code
    return path


async def catch_up_get(port: int, path: str, total: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{port}{path}"
    count = 0
    offset = "-1"
    first: float | None = None
    async with httpx.AsyncClient(timeout=60) as http:
        start = time.perf_counter()
        while True:
            async with http.stream("GET", url, params={"offset": offset}) as response:
                body = b""
                async for part in response.aiter_raw():
                    if first is None:
                        first = time.perf_counter() - start
                    body += part
            count += len(orjson.loads(body))
            offset = response.headers["stream-next-offset"]
            if response.headers.get("stream-up-to-date") == "true":
                break
        elapsed = time.perf_counter() - start
    assert count == total, (count, total)
    return {
        "messages_per_s": total / elapsed,
        "seconds": elapsed,
        "first_byte_ms": (first or 0) * 1000,
    }


async def catch_up_sse(port: int, path: str, total: int) -> dict[str, float]:
    url = f"http://127.0.0.1:{port}{path}"
    count = 0
    first: float | None = None
    async with httpx.AsyncClient(timeout=60) as http:
        start = time.perf_counter()
        async with http.stream("GET", url, params={"offset": "-1", "live": "sse"}) as response:
            buffer = b""
            event = b""
            done = False
            async for part in response.aiter_raw():
                if first is None:
                    first = time.perf_counter() - start
                buffer += part
                *lines, buffer = buffer.split(b"\n")
                data: list[bytes] = []
                for line in lines:
                    if line.startswith(b"event:"):
                        event = line[6:].strip()
                    elif line.startswith(b"data:"):
                        data.append(line[5:])
                    elif line == b"" and data:
                        payload = b"\n".join(data)
                        data = []
                        if event == b"data":
                            count += len(orjson.loads(payload))
                        elif event == b"control" and orjson.loads(payload).get("streamClosed"):
                            done = True
                if done:
                    break
        elapsed = time.perf_counter() - start
    assert count == total, (count, total)
    return {
        "messages_per_s": total / elapsed,
        "seconds": elapsed,
        "first_byte_ms": (first or 0) * 1000,
    }


async def live_latency(port: int, mode: str, messages: int, rate: float) -> dict[str, float]:
    """p50/p99 from a POST's start to the message's arrival at a live follower."""
    base = f"http://127.0.0.1:{port}"
    path = f"{PREFIX}bench-live-{mode}-{uuid.uuid4().hex[:8]}"
    sent: dict[int, float] = {}
    latencies: list[float] = []
    got = asyncio.Event()
    async with httpx.AsyncClient(timeout=60) as http:
        await http.put(base + path, headers={"Content-Type": "application/json"})

        def arrived(items: list[Any]) -> None:
            now = time.perf_counter()
            for item in items:
                latencies.append((now - sent[item["i"]]) * 1000)
            if len(latencies) >= messages:
                got.set()

        async def follow_sse() -> None:
            async with http.stream(
                "GET", base + path, params={"offset": "-1", "live": "sse"}
            ) as response:
                buffer = b""
                event = b""
                async for part in response.aiter_raw():
                    buffer += part
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.startswith(b"event:"):
                            event = line[6:].strip()
                        elif line.startswith(b"data:") and event == b"data":
                            arrived(orjson.loads(line[5:]))

        async def follow_long_poll() -> None:
            offset = "-1"
            cursor = None
            while not got.is_set():
                params = {"offset": offset, "live": "long-poll"}
                if cursor:
                    params["cursor"] = cursor
                response = await http.get(base + path, params=params)
                offset = response.headers["stream-next-offset"]
                cursor = response.headers.get("stream-cursor")
                if response.status_code == 200:
                    arrived(orjson.loads(response.content))

        follower = asyncio.create_task(follow_sse() if mode == "sse" else follow_long_poll())
        await asyncio.sleep(0.5)  # the follower is waiting at the tail
        poster = RawPoster(port, connections=1)
        await poster.open()
        try:
            interval = 1 / rate
            next_at = time.perf_counter()
            for i in range(messages):
                next_at += interval
                delay = next_at - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                sent[i] = time.perf_counter()
                await poster.post(path, orjson.dumps({"i": i}))
            await asyncio.wait_for(got.wait(), 30)
        finally:
            await poster.close()
            follower.cancel()
    return {"p50_ms": pct(latencies, 50), "p99_ms": pct(latencies, 99)}


WORKLOADS = ("append", "producer", "catch_up", "live")


async def run_step(port: int, quick: bool, step: str) -> dict[str, Any]:
    """One workload against one server; its figures, keyed as `report` reads them."""
    scale = 0.2 if quick else 1.0
    out: dict[str, Any] = {}
    if step == "append":
        totals = {1: int(10_000 * scale), 10: int(30_000 * scale), 100: int(100_000 * scale),
                  1000: int(200_000 * scale)}  # fmt: skip
        out["append"] = {str(size): await append_phase(port, size, total)
                         for size, total in totals.items()}  # fmt: skip
    elif step == "producer":
        totals = {1: int(10_000 * scale), 10: int(30_000 * scale), 100: int(100_000 * scale)}
        out["producer"] = {str(size): await append_phase(port, size, total, idempotent=True)
                           for size, total in totals.items()}  # fmt: skip
    elif step == "catch_up":
        catch = int(100_000 * scale)
        path = await fill(port, catch)
        out["catch_up_get"] = await catch_up_get(port, path, catch)
        out["catch_up_sse"] = await catch_up_sse(port, path, catch)
    elif step == "live":
        live = int(2000 * scale)
        out["live_sse"] = await live_latency(port, "sse", live, 200)
        out["live_long_poll"] = await live_latency(port, "long-poll", live, 200)
    return out


def _ratio(ours: float, peer: float, higher_is_better: bool) -> float:
    if not peer or not ours:
        return float("nan")
    return ours / peer if higher_is_better else peer / ours


def report(ours: dict[str, Any], peer: dict[str, Any], against: str = "peer") -> list[str]:
    lines = []
    for key, label in (("append", "append  "), ("producer", "producer")):
        for size, mine in ours.get(key, {}).items():
            theirs = peer[key][size]
            lines.append(
                f"{label} {size:>4} msg/POST   ours {mine['messages_per_s']:>10,.0f} msg/s "
                f"(p99 {mine['p99_ms']:6.1f} ms)   peer {theirs['messages_per_s']:>10,.0f} msg/s "
                f"(p99 {theirs['p99_ms']:6.1f} ms)   "
                f"ratio {_ratio(mine['messages_per_s'], theirs['messages_per_s'], True):5.2f}x"
            )
    for key, label in (("catch_up_get", "catch-up GET"), ("catch_up_sse", "catch-up SSE")):
        if key not in ours:
            continue
        mine, theirs = ours[key], peer[key]
        lines.append(
            f"{label:<20} ours {mine['messages_per_s']:>10,.0f} msg/s (first byte "
            f"{mine['first_byte_ms']:6.1f} ms)   peer {theirs['messages_per_s']:>10,.0f} msg/s "
            f"(first byte {theirs['first_byte_ms']:6.1f} ms)   "
            f"ratio {_ratio(mine['messages_per_s'], theirs['messages_per_s'], True):5.2f}x, "
            f"first byte {_ratio(mine['first_byte_ms'], theirs['first_byte_ms'], False):5.2f}x"
        )
    for key, label in (("live_sse", "live SSE"), ("live_long_poll", "live long-poll")):
        if key not in ours:
            continue
        mine, theirs = ours[key], peer[key]
        lines.append(
            f"{label:<20} ours p50 {mine['p50_ms']:6.2f} ms p99 {mine['p99_ms']:6.2f} ms   "
            f"peer p50 {theirs['p50_ms']:6.2f} ms p99 {theirs['p99_ms']:6.2f} ms   "
            f"p99 ratio {_ratio(mine['p99_ms'], theirs['p99_ms'], False):5.2f}x"
        )
    return [line.replace("peer", against) for line in lines]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="a fifth of the load (a smoke run)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--only", default=",".join(WORKLOADS), help=f"comma-separated of {', '.join(WORKLOADS)}"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also measure this checkout's agent-replay serve",
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every workload")
    args = parser.parse_args()
    only = tuple(w.strip() for w in args.only.split(",") if w.strip())
    if unknown := set(only) - set(WORKLOADS):
        parser.error(f"unknown workloads: {', '.join(sorted(unknown))}")
    rounds: list[dict[str, Any]] = []
    with ExitStack() as stack:
        # Every server up at once, each workload run on each in turn (the order
        # rotating by round), so the machine's load drifts between rounds, not
        # between the figures a ratio compares.
        url = stack.enter_context(scratch_database())
        ports = {"ours": _port(stack.enter_context(server_process(url)))}
        if args.baseline is not None:
            url = stack.enter_context(scratch_database(args.baseline))
            base = stack.enter_context(server_process(url, root=args.baseline))
            ports["baseline"] = _port(base)
        for r in range(args.repeat):
            names = [*ports, "peer"]
            names = names[r % len(names) :] + names[: r % len(names)]
            figures: dict[str, Any] = {name: {} for name in names}
            figures["load_average"] = os.getloadavg()
            for step in only:
                for name in names:
                    figures[name].update(_measure(ports.get(name), args.quick, step))
            rounds.append(figures)
    for r, figures in enumerate(rounds, 1):
        load = ", ".join(f"{x:.1f}" for x in figures["load_average"])
        print(
            f"Durable Streams, round {r}/{len(rounds)}: agent-replay serve vs the reference server "
            f"(load average {load} at the start: indicative only)"
        )
        for line in report(figures["ours"], figures["peer"]):
            print("  " + line)
        if "baseline" in figures:
            print(f"  and vs the baseline in {args.baseline}:")
            for line in report(figures["ours"], figures["baseline"], "base"):
                print("  " + line)
    if args.json:
        Path(args.json).write_text(orjson.dumps(rounds, option=orjson.OPT_INDENT_2).decode())


def _measure(port: int | None, quick: bool, step: str) -> dict[str, Any]:
    """One workload on our server at `port`, or on a peer started for it (None): the
    reference server, left running idle for minutes, was seen answering 404 for
    streams it had just created."""
    if port is not None:
        return asyncio.run(run_step(port, quick, step))
    with peer_process() as peer_port:
        if peer_port is None:
            raise SystemExit("the peer needs Node.js (ops/bench/peer)")
        return asyncio.run(run_step(peer_port, quick, step))


def _port(base_url: str) -> int:
    return int(base_url.rsplit(":", 1)[1])


if __name__ == "__main__":
    main()
