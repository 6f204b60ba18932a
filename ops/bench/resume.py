"""Resume benchmark: `useChat({ resume: true })`'s reconnect in the middle of a long answer.

    python ops/bench/resume.py [--deltas 20000] [--rounds 10] [--client-rounds 3]
                               [--baseline DIR] [--json FILE]

One open run on a chat's thread: `RUN_STARTED`, a text message of `--deltas`
`TEXT_MESSAGE_CONTENT` events (a token of 5 to 9 characters each), and a tool call
whose arguments streamed in `--deltas / 10` pieces, still open. Then
`GET /v1/ai-sdk/{agent}/{chatId}/stream` (what `DefaultChatTransport.reconnectToStream`
sends) is made, side by side in one run, the order flipping every round:

* compact: the default answer (each part so far as one start, one delta, its end);
* replay: `?resume=replay`, every chunk again from `start` (what the endpoint answered
  before);
* baseline (with `--baseline DIR`, a checkout of another commit, e.g. the parent): that
  checkout's own default answer, on its own server and scratch database.

Measured two ways. Over a raw socket, read until the frame whose SSE id is the run's
last seq (the live edge: the client has the message so far and reads live from there):
the bytes and data frames to it (the same every round), the time (median over
`--rounds`) and the server's CPU per resume (its process's user and system time, and
its PostgreSQL backends', from /proc around each request: /proc counts in ticks, so
the mean). By the AI SDK's own client (`ai` 7's `AbstractChat`, the base of `useChat`,
with the stock transport and a state that snapshots the message on each update as
@ai-sdk/react's does: ops/bench/node/resume.mjs): the time until its message holds the
run so far, its CPU time and the message updates it made (medians over
`--client-rounds`). Then the ratios compact ÷ replay (and compact ÷ baseline). CPU moves
less with a shared machine's load than time does. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ops.bench.common import (
    ROOT,
    backends,
    command,
    cpu_seconds,
    free_port,
    healthy,
    is_checkout,
    scratch_database,
    stop,
    write_json,
)

AGENT = "demo"
NODE_DIR = Path(__file__).resolve().parent / "node"


@dataclass(frozen=True)
class Server:
    base: str
    pid: int
    database: str  # its scratch database's name, for its backends' CPU


@contextmanager
def serve(url: str, root: Path) -> Iterator[Server]:
    port = free_port()
    argv, code_env = command(root, "serve", "--port", str(port), "--log-level", "warning")
    env = {**os.environ, **code_env, "REPLAY_DATABASE_URL": url}
    proc = subprocess.Popen(argv, env=env, cwd=root)
    base = f"http://127.0.0.1:{port}"
    if not healthy(proc, base):
        stop(proc)
        raise RuntimeError(f"the server of {root} did not start")
    try:
        yield Server(base, proc.pid, urlsplit(url).path.lstrip("/"))
    finally:
        stop(proc)


def text(deltas: int) -> str:
    return "".join(f"tok{n} " for n in range(deltas))


def argument(deltas: int) -> str:
    return "".join(f"line {n}. " for n in range(deltas // 10))


def run_events(run: str, chat: str, deltas: int) -> list[dict[str, Any]]:
    """An open run: a long text answer, then a tool call still streaming its arguments."""
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": chat, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    ]
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"tok{n} "}
        for n in range(deltas)
    ]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": "m1"})
    events.append({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write"})
    events.append({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"text": "'})
    events += [
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": f"line {n}. "}
        for n in range(deltas // 10)
    ]
    return events


async def seed(server: Server, deltas: int) -> tuple[str, int]:
    """The chat id and its open run's last seq."""
    chat, run = f"chat-{uuid.uuid4().hex[:8]}", f"run-{uuid.uuid4().hex[:8]}"
    events = run_events(run, chat, deltas)
    async with httpx.AsyncClient(base_url=server.base, timeout=120) as http:
        for at in range(0, len(events), 1000):
            r = await http.post(f"/v1/runs/{run}/events", json={"events": events[at : at + 1000]})
            r.raise_for_status()
    return chat, len(events)


@dataclass
class Resume:
    bytes: int
    frames: int
    seconds: float
    server_cpu: float
    database_cpu: float


async def resume(server: Server, chat: str, last_seq: int, query: str) -> Resume:
    """One reconnect, read raw until the frame with SSE id `last_seq` (the live edge)."""
    host, port = urlsplit(server.base).netloc.split(":")
    edge = f"id: {last_seq}\n".encode()
    pids = backends(server.database)
    before = cpu_seconds([server.pid]), cpu_seconds(pids)
    start = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        f"GET /v1/ai-sdk/{AGENT}/{chat}/stream{query} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Accept: text/event-stream\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode())
    body = bytearray()  # chunked transfer coding: sizes and data
    seen = 0  # where the search for the edge goes on (an id line can span two reads)
    while edge not in body[seen:]:
        seen = max(0, len(body) - len(edge))
        size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
        if size == 0:
            raise RuntimeError("the stream ended before the live edge")
        body += (await reader.readexactly(size + 2))[:-2]
    seconds = time.perf_counter() - start
    writer.close()
    after = cpu_seconds([server.pid]), cpu_seconds(pids)
    return Resume(
        bytes=len(body),
        frames=body.count(b"data: "),
        seconds=seconds,
        server_cpu=after[0] - before[0],
        database_cpu=after[1] - before[1],
    )


@dataclass
class Client:
    seconds: float
    cpu: float
    updates: int


def client_resume(server: Server, chat: str, query: str, deltas: int) -> Client:
    """One resume by the AI SDK's own client (`ai` 7, ops/bench/node/resume.mjs)."""
    argv = ["node", str(NODE_DIR / "resume.mjs"), server.base, AGENT, chat, query]
    argv += [str(len(text(deltas))), str(len(argument(deltas)))]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the client failed: {proc.stderr.strip()[-2000:]}")
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return Client(answer["ms"] / 1000, answer["cpuMs"] / 1000, answer["updates"])


def summary(samples: list[Resume], clients: list[Client]) -> dict[str, float]:
    return {
        "bytes": samples[0].bytes,
        "frames": samples[0].frames,
        "seconds_median": statistics.median(s.seconds for s in samples),
        # Means: /proc counts CPU in ticks, coarse against one resume.
        "server_cpu_seconds_mean": statistics.mean(s.server_cpu for s in samples),
        "database_cpu_seconds_mean": statistics.mean(s.database_cpu for s in samples),
        "client_seconds_median": statistics.median(c.seconds for c in clients),
        "client_cpu_seconds_median": statistics.median(c.cpu for c in clients),
        "client_updates": clients[0].updates,
    }


Side = tuple[Server, str, int, str]


async def measure(sides: dict[str, Side], rounds: int) -> dict[str, list[Resume]]:
    samples: dict[str, list[Resume]] = {name: [] for name in sides}
    names = list(sides)
    for n in range(rounds):
        for name in names if n % 2 == 0 else reversed(names):
            server, chat, last_seq, query = sides[name]
            samples[name].append(await resume(server, chat, last_seq, query))
    return samples


def measure_clients(sides: dict[str, Side], rounds: int, deltas: int) -> dict[str, list[Client]]:
    samples: dict[str, list[Client]] = {name: [] for name in sides}
    names = list(sides)
    for n in range(rounds):
        for name in names if n % 2 == 0 else reversed(names):
            server, chat, _, query = sides[name]
            samples[name].append(client_resume(server, chat, query, deltas))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deltas", type=int, default=20_000, help="text deltas in the run")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--client-rounds", type=int, default=3, help="resumes by the AI SDK")
    parser.add_argument("--baseline", type=Path, help="a checkout of another commit")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    if args.baseline is not None and not is_checkout(args.baseline):
        parser.error(f"{args.baseline} is not a checkout of this repository")
    if not (NODE_DIR / "node_modules" / "ai").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=NODE_DIR, check=True)
    with ExitStack() as stack:
        ours = stack.enter_context(serve(stack.enter_context(scratch_database()), ROOT))
        chat, last_seq = asyncio.run(seed(ours, args.deltas))
        sides = {
            "compact": (ours, chat, last_seq, ""),
            "replay": (ours, chat, last_seq, "?resume=replay"),
        }
        if args.baseline is not None:
            root = args.baseline.resolve()
            theirs = stack.enter_context(serve(stack.enter_context(scratch_database(root)), root))
            their_chat, their_seq = asyncio.run(seed(theirs, args.deltas))
            sides["baseline"] = (theirs, their_chat, their_seq, "")
        samples = asyncio.run(measure(sides, args.rounds))
        clients = measure_clients(sides, args.client_rounds, args.deltas)
    figures: dict[str, Any] = {
        "deltas": args.deltas,
        "events": last_seq,
        "rounds": args.rounds,
        **{name: summary(s, clients[name]) for name, s in samples.items()},
    }
    pieces = args.deltas // 10 + 1
    print(f"one open run of {last_seq} events: {args.deltas} text deltas, {pieces} tool-argument")
    print(f"pieces. Raw socket to the live edge, medians (CPU: means) of {args.rounds}:")
    print(f"{'':10} {'bytes':>11} {'frames':>7} {'time':>10} {'server CPU':>11} {'PG CPU':>8}")
    for name in samples:
        f = figures[name]
        print(
            f"{name:10} {f['bytes']:>11,} {f['frames']:>7,}"
            f" {f['seconds_median'] * 1000:>7.0f} ms"
            f" {f['server_cpu_seconds_mean'] * 1000:>8.0f} ms"
            f" {f['database_cpu_seconds_mean'] * 1000:>5.0f} ms"
        )
    print(
        f"The AI SDK's client (ai 7, ops/bench/node/resume.mjs), medians of {args.client_rounds}:"
    )
    print(f"{'':10} {'time':>10} {'client CPU':>11} {'updates':>8}")
    for name in samples:
        f = figures[name]
        print(
            f"{name:10} {f['client_seconds_median'] * 1000:>7.0f} ms"
            f" {f['client_cpu_seconds_median'] * 1000:>8.0f} ms {f['client_updates']:>8,}"
        )
    ratios: dict[str, float] = {}
    for other in [name for name in samples if name != "compact"]:
        for key, label in (
            ("bytes", "bytes"),
            ("seconds_median", "time"),
            ("server_cpu_seconds_mean", "server_cpu"),
            ("client_seconds_median", "client_time"),
            ("client_cpu_seconds_median", "client_cpu"),
        ):
            theirs_value = figures[other][key]
            ratios[f"{label}_compact_over_{other}"] = (
                figures["compact"][key] / theirs_value if theirs_value else float("nan")
            )
    figures["ratios"] = ratios
    for name, value in ratios.items():
        print(f"{name:40} {value:8.4f}")
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
