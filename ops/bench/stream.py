"""Stream benchmark: catch-up throughput, live latency, live fan-out.

    python ops/bench/stream.py [--chunks 100000] [--subscribers 1000] [--seconds 5]
                               [--only replay|live|fanout] [--client-processes 1]
                               [--baseline DIR [--baseline-env NAME=VALUE] [--rounds N]]
                               [--json FILE]

Prints figures with their ratio to a bare server measured in the same run: a
Starlette endpoint reading the same rows with asyncpg in keyset pages of
1,000 and writing each page pre-formatted through a `StreamingResponse`; for
fan-out, the same bare server keeping appends in memory, each follower writing
all it has not sent in one write per wake-up (the floor for 1,000 sockets).
Clients read raw bytes over loopback sockets so that they are not the
bottleneck; fan-out clients run in their own process(es), without cyclic GC.
Live latency runs from the append's send to the chunk's receipt: the service
hands a commit to its followers before it answers the append, so most chunks
arrive before their acknowledgement (each figure says how many), and a
latency from the acknowledgement would be zero or negative.

`--baseline DIR` measures another checkout of this repository the same way in
the same run (`--baseline-env NAME=VALUE`: a setting of its own; alone, this
checkout with that setting): each side its own scratch database (migrated and
seeded by its own code), its two `agent-replay serve` processes and its bare
server, all up at once; each side runs every workload in turn, the order
flipping every round (`--rounds N`, default 3). It prints ours ÷ baseline per
round (catch-up events/s, live and fan-out p99) and `--json` writes {"ours":
[figures per round], "baseline": [the same], "ratios": {name: [per round]}}.
`--baseline .` gives the harness's noise band.
"""

# A harness, not the service: its blocking file polls and Popen are intended.
# ruff: noqa: ASYNC110, ASYNC220, ASYNC240

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import pickle
import re
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.common import (
    ROOT,
    RawPoster,
    command,
    free_port,
    is_checkout,
    pct,
    scratch_database,
    server_process,
    write_json,
)

ID = re.compile(rb"id: (\d+)\n")
CHUNK = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"msg-1","delta":"%s"}'


# -- the baseline server (run as its own process) -----------------------------


def baseline_server(port: int, dsn: str) -> None:
    import asyncpg
    import orjson
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    pool: asyncpg.Pool | None = None

    async def replay(request: Request) -> StreamingResponse:
        run = request.path_params["run"]

        async def pages():  # type: ignore[no-untyped-def]
            assert pool is not None
            after = 0
            while True:
                async with pool.acquire() as conn:
                    rows = await conn.fetch(
                        "SELECT seq, n, chunk FROM events WHERE run_id = $1 AND seq > $2"
                        " ORDER BY seq LIMIT 1000",
                        run,
                        after,
                    )
                if not rows:
                    return
                # A batch row (agent_replay.log.rows): its events, split at the newlines.
                yield "".join(
                    [
                        f"id: {seq - n + 1 + i}\ndata: {text}\n\n"
                        for seq, n, chunk in rows
                        for i, text in enumerate(chunk.split("\n") if n > 1 else (chunk,))
                    ]
                ).encode()
                after = rows[-1][0]

        return StreamingResponse(pages(), media_type="text/event-stream")

    # The fan-out floor: appends kept in memory (no database, no checks), each
    # follower writing everything it has not sent yet in one write per wake-up.
    framed: list[bytes] = []
    advanced = asyncio.Event()

    async def append(request: Request) -> Response:
        nonlocal advanced
        for chunk in orjson.loads(await request.body())["events"]:
            framed.append(b"id: %d\ndata: %s\n\n" % (len(framed) + 1, orjson.dumps(chunk)))
        done, advanced = advanced, asyncio.Event()
        done.set()
        return Response(b'{"last_seq":%d}' % len(framed), media_type="application/json")

    async def follow(request: Request) -> StreamingResponse:
        async def blobs():  # type: ignore[no-untyped-def]
            cursor = len(framed)
            yield b"retry: 1000\n\n"
            while True:
                wake = advanced
                if cursor < len(framed):
                    blob, cursor = b"".join(framed[cursor:]), len(framed)
                    yield blob
                else:
                    await wake.wait()

        return StreamingResponse(blobs(), media_type="text/event-stream")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):  # type: ignore[no-untyped-def]
        nonlocal pool
        pool = await asyncpg.create_pool(dsn, min_size=2, max_size=10)
        yield
        await pool.close()

    routes = [
        Route("/replay/{run}", replay),
        Route("/v1/runs/{run}/events", append, methods=["POST"]),
        Route("/v1/runs/{run}/stream", follow),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- raw loopback HTTP ------------------------------------------------------------


async def _request(
    port: int, path: str, headers: str = ""
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n".encode()
    )
    await writer.drain()
    return reader, writer


async def replay_once(port: int, path: str) -> tuple[int, float, float]:
    """Events received, seconds to the first event, seconds in all."""
    started = time.perf_counter()
    reader, writer = await _request(port, path)
    first = 0.0
    parts: list[bytes] = []
    while data := await reader.read(1 << 20):
        if not first and b"data: " in data:
            first = time.perf_counter() - started
        parts.append(data)
    total = time.perf_counter() - started
    writer.close()
    body = b"".join(parts)
    return body.count(b"\ndata: "), first, total


@dataclass
class Produced:
    """Per seq appended: when its append was sent, and when it was acknowledged
    (monotonic). The service hands a commit to its followers before it answers the
    append, so a chunk is often received before its acknowledgement: latency runs
    from the send."""

    sent: dict[int, float]
    acked: dict[int, float]

    def __len__(self) -> int:
        return len(self.acked)


async def produce(poster: RawPoster, run: str, rate: float, seconds: float) -> Produced:
    """One chunk per append at `rate`/s."""
    produced = Produced({}, {})
    pending: set[asyncio.Task[None]] = set()

    async def one(i: int) -> None:
        body = f'{{"events":[{CHUNK % i}]}}'.encode()
        sent = time.monotonic()
        answer = await poster.post(f"/v1/runs/{run}/events", body)
        seq = int(re.search(rb'"last_seq":(\d+)', answer).group(1))  # type: ignore[union-attr]
        produced.acked[seq] = time.monotonic()
        produced.sent[seq] = sent

    start = time.monotonic()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        task = asyncio.create_task(one(i))
        pending.add(task)
        task.add_done_callback(pending.discard)
    await asyncio.gather(*pending)
    return produced


class Follower(asyncio.Protocol):
    """A raw SSE reader recording (first seq, last seq, time) per receive; checks contiguity."""

    def __init__(self) -> None:
        self.buffer = b""
        self.expected: int | None = None
        self.received: list[tuple[int, int, float]] = []
        self.errors = 0
        self.started = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        if not self.started.done():
            self.started.set_result(None)
        buffer = self.buffer + data
        cut = buffer.rfind(b"\n\n")
        if cut < 0:
            self.buffer = buffer
            return
        self.buffer = buffer[cut + 2 :]
        ids = ID.findall(buffer, 0, cut + 2)
        if ids:
            first, last = int(ids[0]), int(ids[-1])
            if first != (self.expected or first) or last - first + 1 != len(ids):
                self.errors += 1
            self.expected = last + 1
            self.received.append((first, last, now))


async def follow(port: int, run: str, offset: str = "now") -> tuple[asyncio.Transport, Follower]:
    loop = asyncio.get_running_loop()
    transport, follower = await loop.create_connection(Follower, "127.0.0.1", port)
    transport.write(
        f"GET /v1/runs/{run}/stream?offset={offset} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode()
    )
    await follower.started
    return transport, follower  # type: ignore[return-value]


@dataclass
class Latencies:
    values: list[float]  # ms, append sent -> chunk received, per chunk per follower
    missing: int
    before_ack: float  # the share of chunks received before their append's answer


def latencies(followers: list[Follower], produced: Produced) -> Latencies:
    values: list[float] = []
    missing = early = 0
    sent, acked = produced.sent, produced.acked
    for f in followers:
        seen = 0
        for first, last, at in f.received:
            for seq in range(first, last + 1):
                if seq in sent:
                    values.append((at - sent[seq]) * 1000)
                    early += at < acked[seq]
                    seen += 1
        missing += len(acked) - seen + f.errors
    return Latencies(values, missing, early / max(1, len(values)))


# -- fan-out clients (their own process) -----------------------------------------


def fanout_clients(port: int, run: str, count: int, ready: str, out: str) -> None:
    # A full collection walks every recorded receive: a pause of tens of ms
    # that would be charged to the server's latency.
    gc.disable()

    async def main() -> None:
        followers = []
        for i in range(0, count, 100):
            followers.extend(
                await asyncio.gather(*(follow(port, run) for _ in range(min(100, count - i))))
            )
        Path(ready).write_text("ready")
        while not Path(out + ".stop").exists():
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        Path(out).write_bytes(pickle.dumps([(f.received, f.errors) for _, f in followers]))
        for transport, _ in followers:
            transport.close()

    _run(main())


def _run(coro: object) -> None:
    try:
        import uvloop

        uvloop.run(coro)  # type: ignore[arg-type]
    except ImportError:
        asyncio.run(coro)  # type: ignore[arg-type]


# -- the benchmark ---------------------------------------------------------------


async def seed(url: str, run: str, chunks: int, batch_min: int | None) -> None:
    """`stream.py seed`: run in a process of the side's own code (its log, its layout)."""
    from agent_replay.log import EventLog

    async with EventLog.connect(url, batch_min=batch_min) as log:
        for start in range(0, chunks, 10_000):
            batch = [
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "msg-1", "delta": f"token {i} "}
                for i in range(start, min(chunks, start + 10_000))
            ]
            await log.append(run, batch, close=start + 10_000 >= chunks)
        async with log.pool.acquire() as conn:
            # As autovacuum would soon: without statistics a generic plan may scan.
            await conn.execute("VACUUM ANALYZE events")


def seed_with(side: Side, run: str, chunks: int, batch_min: int | None) -> None:
    _, code = command(side.root)
    subprocess.run(
        [sys.executable, __file__, "seed", side.url, run, str(chunks), str(batch_min)],
        env={**os.environ, **side.env, **code},
        cwd=side.root,
        check=True,
    )


def line(name: str, value: str, note: str = "") -> None:
    print(f"  {name:<46} {value:>18}  {note}")


async def bench_replay(
    side: Side, chunks: int, ours: int, base: int, batch_min: int | None = None
) -> dict[str, float]:
    """`batch_min`: the run stored in batch rows (as a POST of 10,000 chunks is), or
    (None) a row per event (as chunks appended one at a time are)."""
    run = f"bench-replay-{batch_min}-{uuid.uuid4().hex[:6]}"
    seed_with(side, run, chunks, batch_min)
    results = {}
    for name, port, path in (
        ("baseline", base, f"/replay/{run}"),
        ("stream", ours, f"/v1/runs/{run}/stream"),
    ):
        await replay_once(port, path)  # warm caches and prepared statements
        runs = [await replay_once(port, path) for _ in range(3)]
        assert all(n == chunks for n, _, _ in runs), runs
        best = min(runs, key=lambda r: r[2])
        results[name] = (chunks / best[2], sorted(r[1] for r in runs)[1])
    layout = "a row per event" if batch_min is None else "in batch rows"
    print(
        f"catch-up ({side.name}): closed run of {chunks:,} chunks {layout}, one raw-bytes client"
        " (best of 3)"
    )
    b_rate, b_first = results["baseline"]
    s_rate, s_first = results["stream"]
    line(
        "bare server (asyncpg pages + StreamingResponse)",
        f"{b_rate:,.0f} ev/s",
        f"first event {b_first * 1000:.1f} ms",
    )
    line(
        "GET /v1/runs/{id}/stream (SSE)",
        f"{s_rate:,.0f} ev/s",
        f"first event {s_first * 1000:.1f} ms; {s_rate / b_rate:.0%} of the bare server"
        " (goal >= 70%, < 20 ms)",
    )
    return {
        "baseline_events_per_s": b_rate,
        "baseline_first_event_ms": b_first * 1000,
        "events_per_s": s_rate,
        "first_event_ms": s_first * 1000,
        "vs_baseline": s_rate / b_rate,
    }


async def bench_live(
    side: str, ours: int, other: int, seconds: float
) -> dict[str, dict[str, float]]:
    print(f"live latency ({side}): 1,000 chunks/s for {seconds:g} s, append sent -> chunk received")
    figures = {}
    for key, name, producer_port in (
        ("same_process", "producer on the same process", ours),
        ("other_process", "producer on another process", other),
    ):
        run = f"bench-live-{producer_port}-{uuid.uuid4().hex[:6]}"
        poster = RawPoster(producer_port)
        await poster.open()
        await poster.post(f"/v1/runs/{run}/events", f'{{"events":[{CHUNK % "start"}]}}'.encode())
        transport, follower = await follow(ours, run, offset="1")
        produced = await produce(poster, run, 1000, seconds)
        deadline = time.monotonic() + 10
        while (follower.expected or 0) <= max(produced.acked) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        transport.close()
        await poster.close()
        measured = latencies([follower], produced)
        values, missing = measured.values, measured.missing
        goal = "10" if producer_port == ours else "20"
        line(
            name,
            f"p50 {pct(values, 50):.2f} ms",
            f"p99 {pct(values, 99):.2f} ms (goal p99 < {goal} ms); missing {missing};"
            f" {measured.before_ack:.0%} received before their append's answer",
        )
        figures[key] = {
            "p50_ms": pct(values, 50),
            "p99_ms": pct(values, 99),
            "missing": missing,
            "before_ack": measured.before_ack,
        }
    return figures


@dataclass
class FanOut:
    latencies: list[float]
    missing: int
    complete: int
    writes: int
    before_ack: float


async def bench_fanout(
    side: str, ours: int, base: int, subscribers: int, seconds: float, processes: int
) -> dict[str, Any]:
    print(
        f"live fan-out ({side}): {subscribers:,} SSE subscribers ({processes} client processes),"
        f" 200 appends/s for {seconds:g} s"
    )
    figures: dict[str, Any] = {"subscribers": subscribers}
    for key, name, port in (
        ("floor", "bare server (in memory, StreamingResponse)", base),
        ("ours", "ours", ours),
    ):
        result = await fan_out(port, subscribers, seconds, processes)
        values = result.latencies
        line(
            name,
            f"p50 {pct(values, 50):.2f} ms",
            f"p99 {pct(values, 99):.2f} ms" + (" (goal p99 < 50 ms)" if port == ours else ""),
        )
        line(
            "  writes received per subscriber",
            f"{result.writes / subscribers:,.0f}",
            f"{len(values) / max(1, result.writes):.1f} chunks per write",
        )
        line(
            "  subscribers that received every chunk",
            f"{result.complete:,} / {subscribers:,}",
            f"missing or out of order {result.missing}",
        )
        line("  received before their append's answer", f"{result.before_ack:.0%}", "")
        figures[key] = {
            "p50_ms": pct(values, 50),
            "p99_ms": pct(values, 99),
            "writes_per_subscriber": result.writes / subscribers,
            "complete": result.complete,
            "missing": result.missing,
            "before_ack": result.before_ack,
        }
    figures["p99_vs_floor"] = figures["ours"]["p99_ms"] / figures["floor"]["p99_ms"]
    return figures


async def fan_out(ours: int, subscribers: int, seconds: float, processes: int) -> FanOut:
    run = f"bench-fanout-{uuid.uuid4().hex[:6]}"
    poster = RawPoster(ours, connections=1)
    await poster.open()
    await poster.post(f"/v1/runs/{run}/events", f'{{"events":[{CHUNK % "start"}]}}'.encode())
    await poster.close()
    with tempfile.TemporaryDirectory() as tmp:
        shares = [
            subscribers // processes + (i < subscribers % processes) for i in range(processes)
        ]
        clients = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "fanout-clients",
                    str(ours),
                    run,
                    str(share),
                    f"{tmp}/ready{i}",
                    f"{tmp}/out{i}",
                ]
            )
            for i, share in enumerate(shares)
        ]
        for i, client in enumerate(clients):
            while not Path(f"{tmp}/ready{i}").exists():
                if client.poll() is not None:
                    raise RuntimeError("fan-out clients died")
                await asyncio.sleep(0.05)
        # Opened now: uvicorn drops keep-alive connections idle for 5 s.
        poster = RawPoster(ours)
        await poster.open()
        produced = await produce(poster, run, 200, seconds)
        await asyncio.sleep(1.0)
        results = []
        for i in range(processes):
            Path(f"{tmp}/out{i}.stop").write_text("")
        for i, client in enumerate(clients):
            client.wait(60)
            results.extend(pickle.loads(Path(f"{tmp}/out{i}").read_bytes()))
    await poster.close()
    followers = []
    for received, errors in results:
        f = Follower.__new__(Follower)
        f.received, f.errors = received, errors
        followers.append(f)
    measured = latencies(followers, produced)
    complete = sum(
        1
        for f in followers
        if sum(last - first + 1 for first, last, _ in f.received) >= len(produced)
    )
    writes = sum(len(f.received) for f in followers)
    return FanOut(measured.values, measured.missing, complete, writes, measured.before_ack)


def _wait_listening(port: int, proc: subprocess.Popen[bytes]) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the baseline server did not start")


@dataclass
class Side:
    """A checkout under test: its scratch database, its two servers and its bare one."""

    name: str
    root: Path
    url: str
    env: dict[str, str]
    ours: int = 0  # the server followed
    other: int = 0  # a second process of it (a producer on another process)
    floor: int = 0  # the bare Starlette server on the same database


@contextmanager
def side_up(name: str, root: Path, env: dict[str, str]) -> Iterator[Side]:
    """A side's database and servers, for as long as the block runs."""
    with ExitStack() as stack:
        url = stack.enter_context(scratch_database(None if root == ROOT else root))
        side = Side(name, root, url, env)
        settings = {**env, "REPLAY_STREAM_SEND_TIMEOUT_SECONDS": "60"}
        side.ours, side.other, side.floor = free_port(), free_port(), free_port()
        for port in (side.ours, side.other):
            stack.enter_context(server_process(url, port, root=root, **settings))
        floor = subprocess.Popen(
            [sys.executable, __file__, "baseline-server", str(side.floor), url]
        )
        stack.callback(floor.wait, 10)
        stack.callback(floor.terminate)
        _wait_listening(side.floor, floor)
        yield side


async def side_figures(side: Side, args: argparse.Namespace) -> dict[str, Any]:
    """Every workload asked for, on one side."""
    figures: dict[str, Any] = {}
    if args.only in (None, "replay"):
        figures["catch_up"] = await bench_replay(side, args.chunks, side.ours, side.floor)
        figures["catch_up_batch_rows"] = await bench_replay(
            side, args.chunks, side.ours, side.floor, batch_min=16
        )
    if args.only in (None, "live"):
        figures["live"] = await bench_live(side.name, side.ours, side.other, args.seconds)
    if args.only in (None, "fanout"):
        figures["fan_out"] = await bench_fanout(
            side.name, side.ours, side.floor, args.subscribers, args.seconds,
            args.client_processes,
        )  # fmt: skip
    return figures


# Ours ÷ baseline, per figure: its name, and where it is in a side's figures.
RATIOS = [
    ("catch_up_events_per_s", ("catch_up", "events_per_s")),
    ("catch_up_batch_rows_events_per_s", ("catch_up_batch_rows", "events_per_s")),
    ("live_same_process_p99_ms", ("live", "same_process", "p99_ms")),
    ("live_other_process_p99_ms", ("live", "other_process", "p99_ms")),
    ("fan_out_p99_ms", ("fan_out", "ours", "p99_ms")),
]


def _at(figures: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = figures
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--subscribers", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--only", choices=["replay", "live", "fanout"])
    parser.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="fan-out subscribers split over this many client processes",
    )
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR",
        help="also measure another checkout's servers, in turns with ours",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-env", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the baseline's alone (without --baseline: this checkout with it)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="rounds with --baseline")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    baseline_env = dict(item.split("=", 1) for item in args.baseline_env)
    if baseline_env and args.baseline is None:
        args.baseline = ROOT
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not is_checkout(args.baseline):
            parser.error(f"--baseline {args.baseline} is not a checkout of this repository")
    with ExitStack() as stack:
        sides = [stack.enter_context(side_up("ours", ROOT, {}))]
        if args.baseline is not None:
            sides.append(stack.enter_context(side_up("baseline", args.baseline, baseline_env)))
        rounds = args.rounds if len(sides) > 1 else 1
        found: dict[str, list[dict[str, Any]]] = {side.name: [] for side in sides}
        for round_ in range(rounds):
            order = sides if round_ % 2 == 0 else sides[::-1]
            if len(sides) > 1:
                print(f"round {round_ + 1}/{rounds}, load {os.getloadavg()[0]:.1f}", flush=True)
            for side in order:
                figures: dict[str, Any] = {}

                async def measure(side: Side = side, figures: dict[str, Any] = figures) -> None:
                    figures.update(await side_figures(side, args))

                _run(measure())
                found[side.name].append(figures)
    if len(sides) == 1:
        write_json(args.json, found["ours"][0])
        return
    ratios: dict[str, list[float]] = {}
    print(f"ours ÷ baseline ({args.baseline}), per round (events/s: higher is better; p99 lower)")
    for name, path in RATIOS:
        pairs = [
            (_at(a, path), _at(b, path))
            for a, b in zip(found["ours"], found["baseline"], strict=True)
        ]
        ratios[name] = [a / b for a, b in pairs if a is not None and b]
        if ratios[name]:
            print(f"  {name:<34} " + " ".join(f"{r:.2f}" for r in ratios[name]))
    write_json(
        args.json,
        {"ours": found["ours"], "baseline": found["baseline"], "ratios": ratios,
         "baseline_dir": str(args.baseline), "baseline_env": baseline_env},
    )  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "baseline-server":
        baseline_server(int(sys.argv[2]), sys.argv[3])
    elif len(sys.argv) > 1 and sys.argv[1] == "seed":
        batch_min = None if sys.argv[5] == "None" else int(sys.argv[5])
        asyncio.run(seed(sys.argv[2], sys.argv[3], int(sys.argv[4]), batch_min))
    elif len(sys.argv) > 1 and sys.argv[1] == "fanout-clients":
        fanout_clients(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
    else:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        main()
