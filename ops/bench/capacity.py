"""Capacity: how many concurrent hosted runs one process serves, against the peers.

    python ops/bench/capacity.py [--quick] [--json FILE] [--systems replay,...]
                                 [--baseline DIR] [--at K,K,... [--repeat N]] [--settle N]

The workload, the same for every system, in one run on the same cores:
- K runs at once, each an upstream that streams like a model (one process,
  `capacity_upstream.py`, paced by asyncio): an event every 30 ms, text
  deltas and tool calls with streamed JSON arguments, 20-60 s per run (a
  first token after 2 s);
- each run followed by one SSE client (client processes of their own,
  `capacity_follow.py`), from the run's start, live to its end.

A trial starts K runs, then opens their followers, and lasts until every
run has streamed its full length. It passes when the followers' token
latency (the upstream's `sentAt` to the follower's read, both
`time.monotonic()`: CLOCK_MONOTONIC is one clock for every process on the
machine) has p99 < 100 ms over every event sent while its follower was
attached, and nothing is lost: every event of every run arrives, exactly
once, in order. A trial that can no longer pass (over 1% of the events
already late, or a run broken) is stopped early. K is searched coarse
(doubling, or halving from a failure, further in proportion when the
failure's p50 was past the limit) then fine (bisection), within a time
budget per system; later systems start at the first one's K. Systems tied at
the top (each search visits K of its own, coarsely) then take turns at the
same K between the tie and the lowest K any of them failed, until one passes
where another fails (`--settle N`: at most N such K, default 2).

The systems:
- replay: `agent-replay serve` (PostgreSQL, each event durable before it is
  served), the upstream as a `REPLAY_AGENTS` agent, runs started with
  `POST /v1/agents/capacity/runs`, followed on `GET /v1/runs/{id}/stream`;
- resumable-stream: Vercel's `resumable-stream` (npm, Redis) in a Node
  server (`peer/capacity/resumable.mjs`) that reads the upstream and serves
  followers with `resumeExistingStream`, as its README shows;
- durable-streams: the Durable Streams reference server (npm
  `@durable-streams/server`, file store, `peer/server.mjs`), a Node
  process (`peer/capacity/durable-reader.mjs`) appending each upstream
  event with the protocol's IdempotentProducer, followers on `live=sse`.

`--baseline DIR` adds a system "baseline": `agent-replay serve` from another
checkout (a commit to compare against, this venv); `--baseline-env NAME=VALUE`
gives the baseline a setting of its own (alone: this checkout with that
setting against it without). `--at K,K,...` replaces the
search by trials at exactly those K, interleaved: for each K, one trial on
each system in turn (the order reversed every other round, `--repeat N`
rounds), all the systems' servers up at once, so a change and its baseline
meet the same machine load within minutes of each other; it prints each K's
p99 side by side and, with a baseline, ours / baseline per K and round.

Memory is the RSS of the serving processes (agent-replay serve; the Node server,
plus Redis's used memory apart; the Durable Streams server plus its reader),
sampled before the runs, after they started, after their followers
attached, and at its peak during the trial. On a shared machine the figures
are indicative only: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import orjson
from capacity_follow import BUCKET_MS
from capacity_upstream import plan
from common import (
    ROOT,
    backends,
    command,
    cpu_seconds,
    free_port,
    healthy,
    is_checkout,
    scratch_database,
    stop,
)

HERE = Path(__file__).resolve().parent
PEER_DIR = HERE / "peer"
NODE_DIR = PEER_DIR / "capacity"
SYSTEMS = ("replay", "resumable-stream", "durable-streams")
# `--baseline DIR`: agent-replay serve from another checkout, beside ours.
BASELINE = "baseline"


@dataclass(frozen=True)
class Workload:
    min_seconds: float
    max_seconds: float
    interval: float
    ttft: float
    seed: int

    def specs(self, tag: str, k: int) -> list[dict[str, Any]]:
        rng = random.Random(f"{self.seed}:{tag}:{k}")
        return [
            {"id": f"cap-{tag}-{k}-{i}",
             "spec": {"run": f"cap-{tag}-{k}-{i}", "seed": self.seed, "interval": self.interval,
                      "ttft": self.ttft,
                      "seconds": rng.uniform(self.min_seconds, self.max_seconds)}}
            for i in range(k)
        ]  # fmt: skip

    @property
    def trial_seconds(self) -> float:
        """About how long a passing trial takes (start, stream, wind down)."""
        return self.ttft + self.max_seconds + 4


@dataclass
class Target:
    """A system under test: where runs start and are followed, whose memory counts."""

    name: str
    start_url: str  # "{run}" is the run's id
    follow_url: str
    pids: list[int]
    stats_url: str | None = None  # a Node peer's /stats (Redis's memory, failures)
    log_path: str | None = None  # the server's log: warnings and errors, counted per trial
    metrics_url: str | None = None  # replay's /metrics (its hosted runs gauge)
    end_url: str | None = None  # abandons what a peer still reads or flushes
    database: str | None = None  # replay's scratch database: its backends' CPU counts apart
    _log_offset: int = 0

    def new_log_lines(self) -> list[str]:
        """What the server logged at warning or worse since the last call."""
        if self.log_path is None:
            return []
        with open(self.log_path, "rb") as f:
            f.seek(self._log_offset)
            text = f.read()
        self._log_offset += len(text)
        return [x for x in text.decode(errors="replace").splitlines() if x.strip()]

    def rss_kb(self) -> int:
        return sum(_rss_kb(pid) for pid in self.pids)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU time so far (user + system) of the serving processes, and of the
        PostgreSQL backends serving its database (replay only; others 0)."""
        database = backends(self.database) if self.database else []
        return cpu_seconds(self.pids), cpu_seconds(database)

    def active(self) -> int:
        """Runs the system still drives (reads, appends, publishes)."""
        try:
            if self.metrics_url is not None:
                for line in httpx.get(self.metrics_url, timeout=10).text.splitlines():
                    if line.startswith("replay_hosted_runs "):
                        return int(float(line.split()[1]))
            return int(self.stats().get("active", 0))
        except httpx.HTTPError:
            return 0

    def commits(self) -> tuple[float, float]:
        """replay's group commits so far and the events they held (others: 0, 0)."""
        count = total = 0.0
        if self.metrics_url is None:
            return count, total
        with suppress(httpx.HTTPError):
            for line in httpx.get(self.metrics_url, timeout=10).text.splitlines():
                if line.startswith("replay_group_commit_events_count "):
                    count = float(line.split()[1])
                elif line.startswith("replay_group_commit_events_sum "):
                    total = float(line.split()[1])
        return count, total

    def stats(self) -> dict[str, Any]:
        if self.stats_url is None:
            return {}
        try:
            answer: dict[str, Any] = httpx.get(self.stats_url, timeout=10).json()
            return answer
        except httpx.HTTPError:
            return {}


@dataclass
class Trial:
    k: int
    passed: bool
    p99_ms: float
    p50_ms: float
    lost: int
    dups: int
    disorder: int
    failed_runs: int
    errors: list[str]
    latencies: int
    events: int
    stopped_early: bool
    seconds: float
    memory: dict[str, float]
    harness: dict[str, float]
    load: float

    def brief(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        per_commit = self.harness["events_per_commit"]
        commits = f", events per commit {per_commit:.1f}" if per_commit else ""
        early = " (stopped early)" if self.stopped_early else ""
        return (
            f"K={self.k:<5} {verdict}  p99 {self.p99_ms:8.1f} ms  p50 {self.p50_ms:7.1f} ms  "
            f"lost {self.lost:<6} dup {self.dups} disorder {self.disorder} "
            f"failed runs {self.failed_runs}  {self.seconds:5.0f} s{early}  "
            f"[upstream late p99 {self.harness['upstream_late_p99_ms']:.0f} ms, client loop "
            f"lag p99 {self.harness['client_lag_p99_ms']:.0f} ms, server warnings "
            f"{self.harness['server_warnings']:.0f}, CPU per 1k events: server "
            f"{self.harness['server_cpu_ms_per_kev']:.0f} ms, db "
            f"{self.harness['db_cpu_ms_per_kev']:.0f} ms, load {self.load:.1f}{commits}]"
        )


@dataclass
class Outcome:
    system: str
    trials: list[Trial] = field(default_factory=list)

    @property
    def best(self) -> Trial | None:
        passed = [t for t in self.trials if t.passed]
        return max(passed, key=lambda t: t.k) if passed else None

    @property
    def capacity(self) -> int:
        return self.best.k if self.best else 0


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _load() -> float:
    return os.getloadavg()[0]


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        one, five, fifteen = os.getloadavg()
        return f"load average: {one:.2f}, {five:.2f}, {fifteen:.2f}"


def _pct(hist: dict[int, int], total: int, p: float) -> float:
    """The upper edge of the bucket holding the p-th percentile (a bound, never less)."""
    if not total:
        return float("nan")
    target = p / 100 * total
    seen = 0
    for bucket in sorted(hist):
        seen += hist[bucket]
        if seen >= target:
            return (bucket + 1) * BUCKET_MS
    return float("inf")


def _lag_p99(lags: dict[int, int]) -> float:
    total = sum(lags.values())
    seen = 0
    for ms in sorted(lags):
        seen += lags[ms]
        if seen >= 0.99 * total:
            return float(ms)
    return 0.0


# --- the processes -------------------------------------------------------------------


@contextmanager
def _process(args: list[str], cwd: Path, what: str) -> Iterator[subprocess.Popen[str]]:
    """A helper process that prints "ready" on stdout once it serves."""
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.strip() == "ready":
                break
        else:
            raise RuntimeError(f"{what} did not start")
        yield proc
    finally:
        stop(proc)


def _npm_ci(folder: Path, marker: str) -> None:
    if shutil.which("node") is None:
        raise SystemExit("the peers need Node.js (node and npm on PATH)")
    if not (folder / "node_modules" / marker).exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, check=True)


def _redis_answers(url: str) -> bool:
    host, port = url.removeprefix("redis://").split("/")[0].split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


@contextmanager
def _redis(url: str) -> Iterator[str]:
    """The Redis at `url`; when none answers there, one of our own on a free port."""
    if _redis_answers(url):
        yield url
        return
    if shutil.which("redis-server") is None:
        raise SystemExit(f"resumable-stream needs Redis: none answers at {url}, no redis-server")
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    own = f"redis://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while not _redis_answers(own):
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("redis-server did not start")
        time.sleep(0.05)
    try:
        yield own
    finally:
        proc.terminate()
        proc.wait(10)


@contextmanager
def replay_target(
    upstream: str, root: Path = ROOT, name: str = "replay", settings: dict[str, str] | None = None
) -> Iterator[Target]:
    """`agent-replay serve` with its defaults (from checkout `root`, with `settings` in its
    environment); its log goes to a file read after each trial."""
    port = free_port()
    env = {**os.environ, **(settings or {}), "REPLAY_AGENTS": json.dumps({"capacity": upstream})}
    # Another checkout's database is migrated by its own code (its own head).
    migrated_by = None if root == ROOT else root
    with (
        scratch_database(migrated_by) as db,
        tempfile.NamedTemporaryFile("w+b", suffix=".log") as log,
    ):
        argv, code_env = command(root, "serve", "--port", str(port), "--log-level", "warning")
        proc = subprocess.Popen(
            argv, env={**env, **code_env, "REPLAY_DATABASE_URL": db}, cwd=root, stderr=log
        )
        base = f"http://127.0.0.1:{port}"
        try:
            if not healthy(proc, base):
                raise RuntimeError("agent-replay serve did not start: " + _tail(log.name))
            yield Target(
                name,
                f"{base}/v1/agents/capacity/runs",
                f"{base}/v1/runs/{{run}}/stream",
                [proc.pid],
                log_path=log.name,
                metrics_url=f"{base}/metrics",
                database=db.rsplit("/", 1)[1].split("?")[0],
            )
        finally:
            stop(proc, 30)


def _tail(path: str, lines: int = 20) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


@contextmanager
def resumable_target(upstream: str, redis_url: str) -> Iterator[Target]:
    _npm_ci(NODE_DIR, "resumable-stream")
    port = free_port()
    prefix = f"capacity-bench-{uuid.uuid4().hex[:8]}"
    with (
        _redis(redis_url) as redis,
        _process(
            ["node", "resumable.mjs", str(port), upstream, redis, prefix],
            NODE_DIR, "the resumable-stream server",
        ) as proc,
    ):  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        yield Target(
            "resumable-stream",
            f"{base}/runs/{{run}}",
            f"{base}/runs/{{run}}/stream",
            [proc.pid],
            stats_url=f"{base}/stats",
        )


@contextmanager
def durable_target(upstream: str) -> Iterator[Target]:
    _npm_ci(PEER_DIR, "@durable-streams/server")
    _npm_ci(NODE_DIR, "@durable-streams/client")
    server_port, reader_port = free_port(), free_port()
    with (
        tempfile.TemporaryDirectory() as data,
        _process(
            ["node", "server.mjs", str(server_port), data], PEER_DIR,
            "the Durable Streams server",
        ) as server,
        _process(
            ["node", "durable-reader.mjs", str(reader_port),
             f"http://127.0.0.1:{server_port}", upstream],
            NODE_DIR, "the Durable Streams reader",
        ) as reader,
    ):  # fmt: skip
        base = f"http://127.0.0.1:{reader_port}"
        yield Target(
            "durable-streams",
            f"{base}/runs/{{run}}",
            f"http://127.0.0.1:{server_port}/runs/{{run}}?offset=-1&live=sse",
            [server.pid, reader.pid],
            stats_url=f"{base}/stats",
            end_url=f"{base}/end",
        )


# --- a trial ---------------------------------------------------------------------------


class _Client:
    """One follower process (capacity_follow.py) and what it last reported."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.progress: dict[str, int] = {}
        self.result: dict[str, Any] | None = None
        self.started = asyncio.Event()
        self.attached = asyncio.Event()

    async def send(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + b"\n")
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass

    async def listen(self) -> None:
        assert self.proc.stdout is not None
        async for line in self.proc.stdout:
            message = orjson.loads(line)
            if "started" in message:
                self.started.set()
            elif "attached" in message:
                self.attached.set()
            elif "progress" in message:
                self.progress = message["progress"]
            elif "result" in message:
                self.result = message["result"]
        self.started.set()
        self.attached.set()


async def run_trial(
    target: Target, k: int, workload: Workload, upstream_stats: str, clients: int, tag: str,
    limit_ms: float,
) -> Trial:  # fmt: skip
    runs = workload.specs(tag, k)
    await asyncio.to_thread(httpx.get, upstream_stats + "?reset", timeout=10)
    began = time.monotonic()
    memory = {"idle_kb": float(target.rss_kb())}
    cpu_before = target.cpu_seconds()
    commits_before = await asyncio.to_thread(target.commits)
    before = await asyncio.to_thread(target.stats)
    redis_idle = before.get("redisUsedMemory")
    target.new_log_lines()  # what it logged before this trial is not this trial's
    shares = [runs[i::clients] for i in range(min(clients, k))]
    deadline = workload.ttft + workload.max_seconds + 20
    procs = []
    for _ in shares:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(HERE / "capacity_follow.py"),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            limit=1 << 28,  # the result is one line: a histogram and every run's counts
        )  # fmt: skip
        procs.append(_Client(proc))
    listeners = [asyncio.create_task(c.listen()) for c in procs]
    for client, share in zip(procs, shares, strict=True):
        job = {"system": target.name, "start_url": target.start_url,
               "follow_url": target.follow_url, "runs": share, "deadline_s": deadline,
               "late_ms": limit_ms}  # fmt: skip
        await client.send(orjson.dumps(job))
    await asyncio.gather(*(c.started.wait() for c in procs))
    memory["runs_kb"] = float(target.rss_kb())
    for client in procs:
        await client.send(b"follow")
    peak = [memory["runs_kb"]]
    redis_peak = [0]

    async def sample() -> None:
        while True:
            peak[0] = max(peak[0], target.rss_kb())
            await asyncio.sleep(0.25)

    sampler = asyncio.create_task(sample())
    with suppress(TimeoutError):
        await asyncio.wait_for(asyncio.gather(*(c.attached.wait() for c in procs)), 30)
    memory["followers_kb"] = float(target.rss_kb())
    # Over 1% of all events late means p99 >= the limit whatever comes next.
    bound = sum(int(r["spec"]["seconds"] / workload.interval) + 3 for r in runs)
    stopped_early = False
    waiting = asyncio.gather(*listeners)
    last_redis = time.monotonic()
    while not waiting.done():
        await asyncio.wait([waiting], timeout=0.5)
        late = sum(c.progress.get("late", 0) for c in procs)
        broken = sum(c.progress.get("broken", 0) for c in procs)
        if target.stats_url and time.monotonic() - last_redis > 2:
            last_redis = time.monotonic()
            stats = await asyncio.to_thread(target.stats)
            redis_peak[0] = max(redis_peak[0], stats.get("redisUsedMemory") or 0)
        if not stopped_early and (late > 0.01 * bound or broken):
            stopped_early = True
            for client in procs:
                await client.send(b"stop")
    sampler.cancel()
    for client in procs:
        await client.proc.wait()
    memory["peak_kb"] = float(peak[0])
    cpu_after = target.cpu_seconds()
    memory["server_cpu_s"] = cpu_after[0] - cpu_before[0]
    memory["db_cpu_s"] = cpu_after[1] - cpu_before[1]
    commits_after = await asyncio.to_thread(target.commits)
    memory["commits"] = commits_after[0] - commits_before[0]
    memory["committed_events"] = commits_after[1] - commits_before[1]
    if redis_idle is not None:
        memory["redis_peak_delta_kb"] = max(0, redis_peak[0] - redis_idle) / 1024
    result = _judge(target, k, runs, procs, upstream_stats, memory, stopped_early,
                    time.monotonic() - began, before.get("failures", 0), limit_ms)  # fmt: skip
    await _wind_down(upstream_stats, target)
    return result


async def _wind_down(upstream_stats: str, target: Target) -> None:
    """Finish whatever still streams (a trial stopped early), so the next starts idle."""
    end = upstream_stats.replace("/stats", "/end")
    await asyncio.to_thread(httpx.get, end, timeout=10)

    async def settled(seconds: float, busy: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + seconds
        while await asyncio.to_thread(busy):
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.2)
        return True

    await settled(30, lambda: bool(httpx.get(upstream_stats, timeout=10).json()["active"]))
    # The system closes the runs the upstream just ended; a backlog still being
    # written (a saturated peer) is abandoned rather than carried into the next trial.
    if not await settled(20, lambda: target.active() > 0) and target.end_url:
        await asyncio.to_thread(httpx.get, target.end_url, timeout=10)
        await settled(10, lambda: target.active() > 0)


def _judge(
    target: Target, k: int, runs: list[dict[str, Any]], procs: list[_Client],
    upstream_stats: str, memory: dict[str, float], stopped_early: bool, seconds: float,
    failures_before: int, limit_ms: float,
) -> Trial:  # fmt: skip
    hist: dict[int, int] = {}
    lags: dict[int, int] = {}
    results: dict[str, dict[str, Any]] = {}
    latencies = events = 0
    for client in procs:
        result = client.result or {"hist": {}, "runs": [], "loop_lag_ms": {}}
        for bucket, count in result["hist"].items():
            hist[int(bucket)] = hist.get(int(bucket), 0) + count
        for ms, count in result["loop_lag_ms"].items():
            lags[int(ms)] = lags.get(int(ms), 0) + count
        latencies += result.get("latencies", 0)
        events += result.get("events", 0)
        for run in result["runs"]:
            results[run["run"]] = run
    lost = dups = disorder = failed = 0
    errors: list[str] = []
    for run in runs:
        got = results.get(run["id"])
        if got is None:
            lost += len(plan(run["spec"]))
            failed += 1
            continue
        total = got["total"] if got["done"] else len(plan(run["spec"]))
        lost += total - got["received"]
        dups += got["dups"]
        disorder += got["disorder"]
        if not got["done"] or got["dups"] or got["disorder"] or got["error"]:
            failed += 1
            if got["error"] and len(errors) < 5:
                errors.append(f"{run['id']}: {got['error']}")
    upstream = httpx.get(upstream_stats, timeout=10).json()
    stats = target.stats()
    failures = stats.get("failures", 0) - failures_before
    if failures:
        errors += [f"{target.name}: {e}" for e in stats.get("lastFailures", [])[-failures:]]
    logged = target.new_log_lines()
    warnings = [x for x in logged if "WARNING" in x or "ERROR" in x]
    errors += [f"{target.name} logged: {x[:200]}" for x in warnings[:2]]
    p99 = _pct(hist, latencies, 99)
    passed = (
        not stopped_early and failed == 0 and lost == 0 and p99 < limit_ms
        and not failures
    )  # fmt: skip
    harness = {
        "upstream_late_p99_ms": float(upstream["late_p99_ms"]),
        "upstream_late_max_ms": float(upstream["late_max_ms"]),
        "client_lag_p99_ms": _lag_p99(lags),
        "server_warnings": float(len(warnings)),
        # CPU per 1,000 events delivered: a machine's load slows a trial but
        # changes this little, so it compares a change with its baseline.
        "server_cpu_ms_per_kev": 1e6 * memory["server_cpu_s"] / max(events, 1),
        "db_cpu_ms_per_kev": 1e6 * memory["db_cpu_s"] / max(events, 1),
        # replay's group commits: how many events one transaction held, on average.
        "events_per_commit": memory["committed_events"] / max(memory["commits"], 1),
    }
    return Trial(k, passed, p99, _pct(hist, latencies, 50), lost, dups, disorder, failed,
                 errors, latencies, events, stopped_early, seconds, memory, harness,
                 _load())  # fmt: skip


# --- the search ------------------------------------------------------------------------


def search(
    trial: Callable[[int], Trial], start: int, budget: float, est: float, fine_steps: int,
    max_k: int, say: Callable[[str], None], limit_ms: float = 100.0,
) -> list[Trial]:  # fmt: skip
    """Coarse (x2 up from a pass, /2 down from a failure), then bisection, within budget.

    Down from a failure whose p50 was already past the limit (half the tokens late: far
    over capacity, as a later system starting at the first one's K may be), the next K
    is K x limit / p50 when that is below K / 2, and the search doubles up from there:
    a slow system reaches its range in one step, not in a halving per trial, each
    costing the wind-down of K runs from the budget."""
    began = time.monotonic()
    trials: list[Trial] = []

    def room() -> bool:
        return not trials or time.monotonic() - began + est <= budget

    def go(k: int) -> Trial:
        result = trial(k)
        trials.append(result)
        say("    " + result.brief())
        for error in result.errors[:3]:
            say("      " + error)
        return result

    best, worst = 0, None
    k = start
    while room():
        if go(k).passed:
            best = k
            if worst is not None or k * 2 > max_k:
                break
            k *= 2
        else:
            worst = k
            if best or k <= 1:
                break
            p50 = trials[-1].p50_ms
            if p50 > limit_ms and k * limit_ms / p50 < k // 2:
                # Far over: doubling up again from the next K finds the edge sooner than
                # bisecting back toward this failure.
                k, worst = max(1, int(k * limit_ms / p50)), None
            else:
                k = max(1, k // 2)
    for _ in range(fine_steps):
        if worst is None or worst - best <= max(1, best // 10) or not room():
            break
        k = (best + worst) // 2 if best else max(1, worst // 2)
        if go(k).passed:
            best = k
        else:
            worst = k
    return trials


def _memory(trial: Trial) -> dict[str, float]:
    m, k = trial.memory, trial.k
    out = {
        "at_runs": k,
        "idle_mb": m["idle_kb"] / 1024,
        "peak_mb": m["peak_kb"] / 1024,
        "per_run_kb": (m["runs_kb"] - m["idle_kb"]) / k,
        "per_follower_kb": (m["followers_kb"] - m["runs_kb"]) / k,
        "peak_per_run_kb": (m["peak_kb"] - m["idle_kb"]) / k,
    }
    if "redis_peak_delta_kb" in m:
        out["redis_peak_per_run_kb"] = m["redis_peak_delta_kb"] / k
    return out


def main() -> None:
    # A SIGTERM unwinds like ^C: every helper process and the scratch database go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3-6 s runs, coarse K only")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--start", type=int, help="the first K tried (default 100, quick 10)")
    parser.add_argument("--max-k", type=int, default=5000)
    parser.add_argument(
        "--budget", type=float, help="seconds of trials per system (default 420, quick 40)"
    )
    parser.add_argument("--fine", type=int, help="bisection steps (default 2, quick 0)")
    parser.add_argument("--clients", type=int, default=2, help="follower processes")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379")
    parser.add_argument(
        "--p99-limit", type=float, default=100.0, metavar="MS",
        help="a trial passes below this p99 (a huge one checks only that nothing is lost)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR",
        help="also measure agent-replay serve from this checkout (system 'baseline')",
    )  # fmt: skip
    parser.add_argument(
        "--at", metavar="K,K,...",
        help="no search: trials at these K, interleaved across the systems",
    )  # fmt: skip
    parser.add_argument("--repeat", type=int, default=1, help="rounds of --at")
    parser.add_argument(
        "--settle", type=int, metavar="N",
        help="K tried to break a tie at the top, the tied systems in turn (default 2, quick 0)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-env", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the baseline's alone (REPLAY_COMMIT_LANES=2); --baseline defaults "
        "to this checkout with it",
    )  # fmt: skip
    args = parser.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = set(systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; known: {', '.join(SYSTEMS)}")
    baseline_env = dict(item.split("=", 1) for item in args.baseline_env)
    if baseline_env and args.baseline is None:
        args.baseline = ROOT
    if args.baseline is not None:
        if not is_checkout(args.baseline):
            parser.error(f"--baseline {args.baseline} is not a checkout of this repository")
        systems.append(BASELINE)
    at = [int(k) for k in args.at.split(",")] if args.at else []
    if args.quick:
        workload = Workload(3.0, 6.0, 0.03, 1.0, args.seed)
    else:
        workload = Workload(20.0, 60.0, 0.03, 2.0, args.seed)
    # Room for the first system's two bisections after its climb from `start` (100, 200,
    # 400, 800 takes four trials): with less, it reported its last coarse pass while the
    # systems after it, starting at that K, had room to bisect theirs.
    budget = args.budget or (40.0 if args.quick else 420.0)
    fine = args.fine if args.fine is not None else (0 if args.quick else 2)
    if args.settle is None:
        args.settle = 0 if args.quick else 2
    start = args.start or (10 if args.quick else 100)

    def say(line: str) -> None:
        print(line, flush=True)

    load_before = _uptime()
    say(f"capacity: {len(systems)} systems, runs of {workload.min_seconds:g}-"
        f"{workload.max_seconds:g} s, an event every {workload.interval * 1000:g} ms; "
        f"{load_before}")  # fmt: skip
    outcomes: list[Outcome] = []
    with ExitStack() as stack:
        port = free_port()
        stack.enter_context(
            _process(
                [sys.executable, str(HERE / "capacity_upstream.py"), str(port)],
                HERE,
                "the upstream",
            )
        )
        upstream = f"http://127.0.0.1:{port}/agent"
        upstream_stats = f"http://127.0.0.1:{port}/stats"

        def open_target(name: str, stack: ExitStack) -> Target:
            if name == "replay":
                return stack.enter_context(replay_target(upstream))
            if name == BASELINE:
                return stack.enter_context(
                    replay_target(upstream, args.baseline, BASELINE, baseline_env)
                )
            if name == "resumable-stream":
                return stack.enter_context(resumable_target(upstream, args.redis))
            return stack.enter_context(durable_target(upstream))

        if at:
            outcomes = interleaved(
                [open_target(name, stack) for name in systems], at, args.repeat,
                lambda target, k, tag: asyncio.run(
                    run_trial(target, k, workload, upstream_stats, args.clients, tag,
                              args.p99_limit)
                ),
                say,
            )  # fmt: skip
        for name in [] if at else systems:
            say(f"  {name}:")
            outcome = Outcome(name)
            with ExitStack() as per_system:
                target = open_target(name, per_system)
                tag = uuid.uuid4().hex[:6]

                def trial(k: int, target: Target = target, tag: str = tag) -> Trial:
                    return asyncio.run(
                        run_trial(
                            target, k, workload, upstream_stats, args.clients, tag, args.p99_limit
                        )
                    )

                # Later systems start where the earlier ones ended (the comparison's K).
                first = max((o.capacity for o in outcomes), default=0) or start
                outcome.trials = search(
                    trial, first, budget, workload.trial_seconds, fine, args.max_k, say,
                    args.p99_limit,
                )  # fmt: skip
            outcomes.append(outcome)
        if not at and args.settle:
            settle(
                outcomes, open_target,
                lambda target, k, tag: asyncio.run(
                    run_trial(target, k, workload, upstream_stats, args.clients, tag,
                              args.p99_limit)
                ),
                args.settle, say,
            )  # fmt: skip
    load_after = _uptime()
    report(outcomes, workload, load_before, load_after, args.json, say, args.p99_limit, bool(at))


def settle(
    outcomes: list[Outcome], open_target: Callable[[str, ExitStack], Target],
    trial: Callable[[Target, int, str], Trial], steps: int, say: Callable[[str], None],
) -> None:  # fmt: skip
    """Break a tie at the top: the tied systems take turns at the same K.

    Each search steps coarsely through K of its own, so two systems whose edges
    differ by less than a step tie at the last K both passed. Here the tied
    systems run, one after the other (the order reversed every step), at the K
    halfway to the lowest K any of them failed: all passing moves the tie up, all
    failing moves the bound down, and one passing where another fails settles it
    (each system's capacity stays the largest K it passed). At most `steps` such
    K, none closer than a twentieth of the tie."""
    top = max((o.capacity for o in outcomes), default=0)
    tied = [o for o in outcomes if top and o.capacity == top]
    if len(tied) < 2:
        return
    failed = [t.k for o in tied for t in o.trials if not t.passed and t.k > top]
    low, high = top, min(failed, default=top * 2)
    tag = uuid.uuid4().hex[:6]
    with ExitStack() as stack:
        targets = {o.system: open_target(o.system, stack) for o in tied}
        for step in range(steps):
            if high - low <= max(1, low // 20):
                return
            k = (low + high) // 2
            say(f"  tied at K={low} ({', '.join(o.system for o in tied)}): each at K={k}")
            passed = []
            for o in tied if step % 2 == 0 else tied[::-1]:
                result = trial(targets[o.system], k, f"{tag}s{step}")
                o.trials.append(result)
                passed.append(result.passed)
                say(f"    {o.system:<17}" + result.brief())
                for error in result.errors[:3]:
                    say("      " + error)
            if all(passed):
                low = k
            elif not any(passed):
                high = k
            else:
                return


def interleaved(
    targets: list[Target], ks: list[int], rounds: int,
    trial: Callable[[Target, int, str], Trial], say: Callable[[str], None],
) -> list[Outcome]:  # fmt: skip
    """Trials at each K on every system in turn (reversed every other round)."""
    outcomes = {t.name: Outcome(t.name) for t in targets}
    tag = uuid.uuid4().hex[:6]
    for round_ in range(rounds):
        order = targets if round_ % 2 == 0 else targets[::-1]
        for k in ks:
            for target in order:
                result = trial(target, k, f"{tag}r{round_}")
                outcomes[target.name].trials.append(result)
                say(f"    {target.name:<17}" + result.brief())
                for error in result.errors[:3]:
                    say("      " + error)
    return list(outcomes.values())


def _side_by_side(outcomes: list[Outcome], say: Callable[[str], None]) -> dict[str, Any]:
    """Each K's trials per system (`--at`), and with a baseline ours / baseline per trial."""
    ks = sorted({t.k for o in outcomes for t in o.trials})
    by = {o.system: o for o in outcomes}
    say("  at each K (p99 ms, ✗ failed; server and db CPU ms per 1,000 events; load):")
    table: dict[str, Any] = {}
    for k in ks:
        row: dict[str, Any] = {}
        cells = []
        for o in outcomes:
            trials = [t for t in o.trials if t.k == k]
            row[o.system] = [
                {"p99_ms": t.p99_ms, "passed": t.passed, "load": t.load,
                 "server_cpu_ms_per_kev": t.harness["server_cpu_ms_per_kev"],
                 "db_cpu_ms_per_kev": t.harness["db_cpu_ms_per_kev"]}
                for t in trials
            ]  # fmt: skip
            cells.append(f"{o.system} " + " ".join(
                f"{t.p99_ms:.0f}{'' if t.passed else '✗'}"
                f"/{t.harness['server_cpu_ms_per_kev']:.0f}+{t.harness['db_cpu_ms_per_kev']:.0f}"
                f"@{t.load:.1f}" for t in trials
            ))  # fmt: skip
        if "replay" in by and BASELINE in by:
            ours = [t for t in by["replay"].trials if t.k == k]
            base = [t for t in by[BASELINE].trials if t.k == k]
            pairs = list(zip(ours, base, strict=False))
            row["cpu_vs_baseline"] = [
                (a.harness["server_cpu_ms_per_kev"] + a.harness["db_cpu_ms_per_kev"])
                / max(b.harness["server_cpu_ms_per_kev"] + b.harness["db_cpu_ms_per_kev"], 1e-9)
                for a, b in pairs
            ]
            row["p99_vs_baseline"] = [a.p99_ms / max(b.p99_ms, 1e-9) for a, b in pairs]
            cells.append("ours/baseline CPU " + " ".join(
                f"{r:.2f}" for r in row["cpu_vs_baseline"]
            ) + ", p99 " + " ".join(f"{r:.2f}" for r in row["p99_vs_baseline"]))  # fmt: skip
        table[str(k)] = row
        say(f"    K={k:<5} " + "; ".join(cells))
    return table


def report(
    outcomes: list[Outcome], workload: Workload, load_before: str, load_after: str,
    json_path: str | None, say: Callable[[str], None], limit_ms: float,
    side_by_side: bool = False,
) -> None:  # fmt: skip
    say("")
    say(f"capacity (p99 < {limit_ms:g} ms, nothing lost): one process each, same cores")
    say(f"  {'system':<18}{'runs':>6}{'p99 ms':>9}{'lost':>7}{'per run':>11}"
        f"{'per follower':>14}{'peak/run':>11}  trials (K: p99 ms)")  # fmt: skip
    out: dict[str, Any] = {"runs": {}, "p99_ms": {}, "lost": {}, "measured_at": {},
                           "memory": {}, "trials": {}}  # fmt: skip
    for o in outcomes:
        # The figures of the largest K that passed; with none, of the smallest tried.
        shown = o.best or (min(o.trials, key=lambda t: t.k) if o.trials else None)
        out["runs"][o.system] = o.capacity
        out["p99_ms"][o.system] = shown.p99_ms if shown else None
        out["lost"][o.system] = shown.lost if shown else None
        out["measured_at"][o.system] = shown.k if shown else None
        out["trials"][o.system] = [
            {"k": t.k, "passed": t.passed, "p99_ms": t.p99_ms, "p50_ms": t.p50_ms,
             "lost": t.lost, "dups": t.dups, "disorder": t.disorder,
             "failed_runs": t.failed_runs, "stopped_early": t.stopped_early,
             "seconds": t.seconds, "events": t.events, "load": t.load, **t.harness,
             "rss_peak_mb": t.memory["peak_kb"] / 1024, "errors": t.errors}
            for t in o.trials
        ]  # fmt: skip
        if shown is None:
            continue
        memory = _memory(shown)
        out["memory"][o.system] = memory
        history = " ".join(
            f"{t.k}:{t.p99_ms:.0f}{'' if t.passed else '✗'}"
            for t in sorted(o.trials, key=lambda t: t.k)
        )
        say(f"  {o.system:<18}{o.capacity:>6}{shown.p99_ms:>9.1f}{shown.lost:>7}"
            f"{memory['per_run_kb']:>8.0f} KB{memory['per_follower_kb']:>11.0f} KB"
            f"{memory['peak_per_run_kb']:>8.0f} KB  {history}")  # fmt: skip
    if side_by_side:
        out["at"] = _side_by_side(outcomes, say)
    ours = out["runs"].get("replay")
    ratios = {}
    for o in outcomes:
        if o.system != "replay" and ours is not None and o.capacity:
            ratios[f"replay_vs_{o.system}"] = ours / o.capacity
    if ratios:
        say("  runs, replay / peer: " + ", ".join(f"{k[10:]} {v:.2f}x" for k, v in ratios.items()))
    say(f"  machine: before {load_before}")
    say(f"           after  {load_after}")
    out["ratios"] = ratios
    out["load"] = {"before": load_before, "after": load_after}
    out["workload"] = {
        "min_seconds": workload.min_seconds, "max_seconds": workload.max_seconds,
        "interval_ms": workload.interval * 1000, "ttft_seconds": workload.ttft,
        "p99_limit_ms": limit_ms,
    }  # fmt: skip
    if json_path:
        Path(json_path).write_text(
            orjson.dumps(_rounded(out), option=orjson.OPT_INDENT_2).decode() + "\n"
        )


def _rounded(value: Any) -> Any:
    """Floats to 0.01 (the histogram's 0.1 ms buckets leave float noise behind)."""
    if isinstance(value, float):
        return round(value, 2) if value == value and abs(value) != float("inf") else None
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


if __name__ == "__main__":
    main()
