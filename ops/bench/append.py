"""Append throughput and acknowledgement latency, against raw asyncpg in the same run.

    python ops/bench/append.py [--quick] [--json FILE]
    python ops/bench/append.py --baseline DIR [--baseline-env NAME=VALUE] [--rounds N]
                               [--sizes N,N] [--quick] [--json FILE]
    python ops/bench/append.py --env NAME=VALUE [--rounds N] [--quick] [--json FILE]

Prints events/s for batches of 1, 10, 100 and 1,000 chunks (each producer on
its own run; for batches of 1 also all producers on one run): over HTTP (a
`agent-replay serve` process on loopback), through the in-process writer, and for
the baselines, raw asyncpg with one transaction per batch that bumps the run
row and inserts the events: as one row each (unnest and COPY, into a table
shaped as the log was before revision 0005), and as the log stores a large
batch since revision 0007 (agent_replay.log.rows): rows of up to 256 events, the
chunks and types joined with newlines, lz4-compressed as the log's columns are
(and the same into a pglz copy of the table). "of raw" is against the raw
limit of the layout the log uses (lz4 batch rows if its `events` has `n`).
Batch size 1 runs with 50 concurrent producers, as producers of single
chunks do. Commits are durable (synchronous_commit=on, the server default;
checked below).

The chunks are a realistic mix, not one chunk repeated (which would compress
far better than real ones): text deltas of varied words, tool calls with
their JSON arguments streamed in fragments, fresh message and tool-call ids.

For batches of 1, two more baselines bound what any group commit can do here:
a minimal one in raw asyncpg (one connection, one statement per group that
bumps each run and inserts its event, no validation, summaries or checks),
and the same inserting events only, with seqs kept in memory (no run rows at
all). The in-process writer and the first of these take five rounds in turn,
each right after the other, as the machine's speed drifts within a minute:
"of the raw group commit" is the median of the rounds' own ratios (each side's
events/s its best round; the CPU split the median round's). And since 50
closed-loop producers make latency at saturation equal 50 / throughput
(Little's law), HTTP latency is also measured open-loop: the
50 producers paced to the goal's 2,500 events/s, each request timed from when
it was due (so a stall is charged to every request it delays).

The peer a user would pick instead, the Durable Streams reference server
(Node, npm `@durable-streams/server`, its file store fdatasync'ing each
append), takes the same load in the same run: a stream per producer, each
batch POSTed as a JSON array (installed into ops/bench/peer on first use).

Phases start after a CHECKPOINT; the 1,000-chunk phases run twice and report
the better run of each, as the machine's disk is noisy.

With `--workers N` (default 2), the HTTP phases run again against `replay
serve --workers N` ("HTTP, N workers"; the peer is one Node process). From 10
chunks the one-process HTTP phase also runs with each batch sent as NDJSON (a
chunk per line, `application/x-ndjson`): "HTTP, the same as NDJSON".

`--json FILE` writes {"http_vs_peer": {"1", "10", "100", "1000"},
"http_vs_raw": {"1000"}, "http_ndjson_vs_peer": {"10", "100", "1000"}, "workers": N,
"http_workers_vs_peer": {size},
"http_workers_vs_raw": {size}, "in_process_vs_group_commit": r (the median round's),
"in_process_vs_group_commit_rounds": [r, r, r], "events_per_second":
{size: {phase: ev/s}}, "bytes_per_event": {table: bytes}, "layout": "rows" or
"batch", "cpu_us_per_event": {"http": {size: {"server", "db"}}, "in_process_1":
{"writer", "ceiling-bump", "ceiling-insert": {"process", "db"}}, "raw_batch_lz4_db":
{size}}} (ratios as fractions; "http_vs_raw" against the raw limit of the log's own
layout).

Side by side (`--baseline DIR`: another checkout of this repository, e.g. the
commit before a change; `--baseline-env NAME=VALUE`: a setting of the baseline's
alone, and without `--baseline` this checkout with that setting against itself
without; `--env NAME=VALUE`: a setting of ours alone, the same way, e.g. `--env
REPLAY_REDACT=default` for redaction on against off): instead of the phases
above, the service's own, each on both sides in the same run. Both `agent-replay
serve` processes are up at once, each on a scratch database migrated by its own
code; every phase runs on one side and right after on the other (ABAB: the order
flips every round, `--rounds N`, default 3), so the machine's drift meets both.
The phases: HTTP at every size, each as JSON and as NDJSON (a single chunk as a
line too), and the in-process writer at every size (in a process of each side's
code). Each phase prints both sides' events/s and CPU per event (the server's,
or the writer process's, and its PostgreSQL backends'), and ours ÷ baseline per
round with their median. `--baseline .` (this checkout against itself) gives the
harness's own noise band. `--json FILE` writes {"baseline", "baseline_env",
"rounds", "phases": {phase: {"ours", "baseline": [{"events_per_s", "p50_ms",
"p99_ms", "cpu_us", "db_cpu_us"} per round], "events_per_s_ratio",
"cpu_us_ratio", "db_cpu_us_ratio": [ours ÷ baseline per round]}}}, phases named
"http-json-1", "http-ndjson-1000", "writer-100" and so on.

`--database-url URL` (side by side only): our side runs on that database, already
migrated, instead of a scratch one: e.g. a Citus coordinator's, against the baseline's
plain PostgreSQL (`--baseline .`, the default with it), as `python -m tests.support.citus`
forms one. `--sizes 1,100,1000` runs only those batch sizes, `--phases http-json,writer`
only those phases.

Under each size, the CPU per event of the one-process HTTP phases: the server's
(its own /metrics) and its PostgreSQL backends' (/proc, by the scratch
database's name in their process titles), beside the raw lz4 batch rows'
backends': what one event costs each side. For single chunks in this process,
the same split for the writer and the minimal group commit: 50 closed-loop
producers wait on each commit, so this process's work and the database's
mostly take turns, and the sum of the two is what a group costs.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
import orjson
from common import (
    ROOT,
    RawPoster,
    backends,
    checkpoint,
    command,
    cpu_seconds,
    free_port,
    is_checkout,
    pct,
    scratch_database,
    server_process,
    write_json,
)

from agent_replay.log import EventLog
from agent_replay.workers import tune_collector

PRODUCERS_SINGLE = 50

# This process's own collector settings, restored after each phase (see `drive`).
_COLLECTOR = gc.get_threshold()

# (size, method) -> the raw baseline's PostgreSQL CPU seconds per event, per run.
RAW_DB_CPU: dict[tuple[int, str], list[float]] = {}

# events/s and per-append latencies (ms)
Result = tuple[float, list[float]]

# Single-chunk phases in this process ("writer", "ceiling") -> the CPU per event (µs) of
# this process and of the database's backends: which side a group commit waits on.
SPLIT: dict[str, dict[str, float]] = {}


@contextmanager
def cpu_split(url: str, phase: str, events: int) -> Iterator[None]:
    """Records `phase`'s CPU per event in SPLIT: this process's (its producers and, for
    the writer, the log's own Python) and its PostgreSQL backends' (those open at the
    end, whose CPU before the start is taken away; one that closes within is lost)."""
    database = url.rsplit("/", 1)[1]
    before = {pid: cpu_seconds([pid]) for pid in backends(database)}
    own = time.process_time()
    yield
    after = {pid: cpu_seconds([pid]) for pid in backends(database)}
    db = sum(used - before.get(pid, 0.0) for pid, used in after.items())
    SPLIT[phase] = {
        "process": (time.process_time() - own) / events * 1e6,
        "db": db / events * 1e6,
    }


_WORDS = str.split(
    "the of and to in is that for it as was with be by on not he this are or his from at "
    "which but have an they you were her she there been one all we their has would when "
    "if so no will can more other its into time only new some could these two may first "
    "then do any like my now over such our man me even most made after also did many "
    "database commit latency replay stream agent token model tool search result answer "
    "function argument durable event offset cursor resume browser tab session user"
)


def chunk(i: int) -> dict[str, object]:
    """Chunk `i` of an agent's stream: per 40, a message of text deltas (1-4 words
    each, its own message id) then a tool call (start, JSON arguments in
    fragments, end). Deterministic in `i`; no two chunks alike."""
    rng = random.Random(i)
    turn = random.Random(-1 - i // 40)  # what the whole message or call shares
    message = f"msg-{i // 40:08x}-{turn.getrandbits(48):012x}"
    call = f"call_{i // 40:06d}{turn.getrandbits(64):016x}"
    at = i % 40
    if at < 30:
        delta = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 4)))
        return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": delta + " "}
    if at == 30:
        return {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "search_docs",
                "parentMessageId": message}  # fmt: skip
    if at < 39:
        query = " ".join(turn.choice(_WORDS) for _ in range(3))
        year = turn.randint(1990, 2026)
        args = json.dumps({"query": query, "limit": turn.randint(1, 50), "filters": {"year": year}})
        part = len(args) // 8
        return {"type": "TOOL_CALL_ARGS", "toolCallId": call,
                "delta": args[(at - 31) * part : (at - 30) * part]}  # fmt: skip
    return {"type": "TOOL_CALL_END", "toolCallId": call}


@functools.lru_cache(maxsize=1)
def batches(total: int, size: int) -> list[list[dict[str, object]]]:
    """Shared by a size's repeated phases, which only read them. Making them
    takes seconds: phases make them before opening their keep-alive
    connections, which would otherwise outlast the server's idle timeout."""
    return [[chunk(i + j) for j in range(size)] for i in range(0, total, size)]


async def drive(
    producers: int,
    work: list[list[dict[str, object]]],
    send: Callable[[int, list[dict[str, object]]], Awaitable[None]],
) -> tuple[float, list[float]]:
    """Run `work` across `producers` tasks; return events/s and per-append latencies (ms).

    Every phase runs with `agent-replay serve`'s collector settings (the in-process writer
    runs here as it would there), and with `work` (built once, up to 400,000 dicts)
    kept out of the collections, as the server keeps its startup objects: left in,
    full collections walked it and stalled a phase at 1,000 chunks per append by
    ~70 ms at a time, whichever phase it was.
    """
    queue = list(enumerate(work))
    latencies: list[float] = []
    events = sum(len(b) for b in work)

    async def producer(p: int) -> None:
        while queue:
            _, batch = queue.pop()
            t0 = time.perf_counter()
            await send(p, batch)
            latencies.append((time.perf_counter() - t0) * 1000)

    tune_collector()
    gc.freeze()
    try:
        start = time.perf_counter()
        await asyncio.gather(*(producer(p) for p in range(producers)))
        return events / (time.perf_counter() - start), latencies
    finally:
        gc.unfreeze()
        gc.set_threshold(*_COLLECTOR)


# Raw asyncpg: the ceiling. Same rows, same columns, one transaction per batch,
# the run row bumped like the service does. Events as rows go to `raw_events`,
# shaped as `events` was before revision 0005; batch rows to `raw_batches`,
# shaped as `events`' batch rows are, with the server's default compression (pglz), and
# to a copy with lz4 on both (what 0007_event_batches and 0008_type_compression give
# the log's columns).
RAW_TABLES = """
CREATE TABLE raw_events (
    run_id text NOT NULL, seq bigint NOT NULL, type text NOT NULL, chunk text NOT NULL,
    message_id text, tool_call_id text, received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE raw_batches (
    run_id text NOT NULL, seq bigint NOT NULL, n integer NOT NULL, type text NOT NULL,
    chunk text NOT NULL, received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE raw_batches_lz4 (LIKE raw_batches INCLUDING ALL);
ALTER TABLE raw_batches_lz4 ALTER COLUMN chunk SET COMPRESSION lz4;
ALTER TABLE raw_batches_lz4 ALTER COLUMN type SET COMPRESSION lz4;
"""
UNNEST = """
INSERT INTO raw_events (run_id, seq, type, chunk, message_id, tool_call_id)
SELECT $1, s, t, c, m, NULL
FROM unnest($2::bigint[], $3::text[], $4::text[], $5::text[]) AS u(s, t, c, m)
"""
# A batch's rows (as agent_replay.log.rows packs them: the row's seq is its last event's).
BATCH_ROWS = """
INSERT INTO {table} (run_id, seq, n, type, chunk)
SELECT $1, s, n, t, c FROM unnest($2::bigint[], $3::int[], $4::text[], $5::text[]) AS u(s, n, t, c)
"""
BATCH_MAX = 256
# method -> the table it fills
RAW_TABLE = {"unnest": "raw_events", "copy": "raw_events", "batch": "raw_batches",
             "batch-lz4": "raw_batches_lz4"}  # fmt: skip


LAYOUTS = {
    "batch": "batch rows: raw batch rows, lz4",
    "rows": "a row per event: raw unnest or COPY",
}


async def raw_tables(url: str) -> str:
    """Make the raw tables; returns the log's own layout: "batch" (batch rows) if its
    migrations gave `events` a count per row (0007_event_batches), else "rows"."""
    conn = await asyncpg.connect(url)
    try:
        layout = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'events' AND column_name = 'n')"
        )
        await conn.execute(RAW_TABLES)
    finally:
        await conn.close()
    return "batch" if layout else "rows"


def raw_limit(r: dict[str, Result], layout: str) -> float:
    """The raw limit of the log's layout: its rows inserted without the service."""
    # Batch rows: their lz4 form, as 0007 and 0008 compress the columns where the
    # server has lz4 (the raw tables need it too).
    return r["batch-lz4"][0] if layout == "batch" else max(r["unnest"][0], r["copy"][0])


async def bytes_per_event(url: str) -> dict[str, float]:
    """Each raw table's size on disk (heap, TOAST, index) per event stored."""
    conn = await asyncpg.connect(url)
    try:
        sizes: dict[str, float] = {}
        for table in ("raw_events", "raw_batches", "raw_batches_lz4"):
            if table == "raw_events":
                n = await conn.fetchval("SELECT count(*) FROM raw_events")
            else:
                n = await conn.fetchval(f"SELECT sum(n) FROM {table}")
            size = await conn.fetchval("SELECT pg_total_relation_size($1::regclass)", table)
            sizes[table] = size / n if n else 0.0
        return sizes
    finally:
        await conn.close()


async def raw_baseline(url: str, size: int, total: int, method: str) -> tuple[float, list[float]]:
    producers = PRODUCERS_SINGLE if size == 1 else 4
    # A connection per producer: no pool, so no reset query per batch.
    conns = [await asyncpg.connect(url) for _ in range(producers)]
    pids = [await conn.fetchval("SELECT pg_backend_pid()") for conn in conns]
    runs = [f"raw-{method}-{size}-{p}-{uuid.uuid4().hex[:6]}" for p in range(producers)]
    await conns[0].executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in runs])
    work = batches(total, size)

    async def send(p: int, batch: list[dict[str, object]]) -> None:
        texts = [orjson.dumps(c).decode() for c in batch]
        conn = conns[p]
        async with conn.transaction():
            last = await conn.fetchval(
                "UPDATE runs SET last_seq = last_seq + $2 WHERE run_id = $1 RETURNING last_seq",
                runs[p],
                len(batch),
            )
            seqs = list(range(last - len(batch) + 1, last + 1))
            if method.startswith("batch"):
                types = [str(c["type"]) for c in batch]
                starts = range(0, len(batch), BATCH_MAX)
                await conn.execute(
                    BATCH_ROWS.format(table=RAW_TABLE[method]),
                    runs[p],
                    [seqs[min(i + BATCH_MAX, len(batch)) - 1] for i in starts],
                    [min(BATCH_MAX, len(batch) - i) for i in starts],
                    ["\n".join(types[i : i + BATCH_MAX]) for i in starts],
                    ["\n".join(texts[i : i + BATCH_MAX]) for i in starts],
                )
            elif method == "copy":
                await conn.copy_records_to_table(
                    "raw_events",
                    records=[
                        (runs[p], s, c["type"], t, c.get("messageId"), c.get("toolCallId"))
                        for s, c, t in zip(seqs, batch, texts, strict=True)
                    ],
                    columns=["run_id", "seq", "type", "chunk", "message_id", "tool_call_id"],
                )
            else:
                await conn.execute(
                    UNNEST,
                    runs[p],
                    seqs,
                    [str(c["type"]) for c in batch],
                    texts,
                    [c.get("messageId") for c in batch],
                )

    try:
        used = cpu_seconds(pids)
        result = await drive(producers, work, send)
        RAW_DB_CPU.setdefault((size, method), []).append((cpu_seconds(pids) - used) / total)
        return result
    finally:
        for conn in conns:
            await conn.close()


# The minimal group commit: whatever the producers queued while the previous
# statement ran, in one statement. With run rows, seqs are taken the way the
# service takes them (bump the run row, number the events from it).
CEILING_BUMP = """
WITH upd AS (
    UPDATE runs SET last_seq = last_seq + 1
    FROM unnest($1::text[]) AS r(id) WHERE run_id = r.id
    RETURNING run_id, last_seq
)
INSERT INTO raw_events (run_id, seq, type, chunk, message_id)
SELECT upd.run_id, upd.last_seq, u.t, u.c, u.m
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS u(r, t, c, m)
JOIN upd ON upd.run_id = u.r
"""
CEILING_INSERT = """
INSERT INTO raw_events (run_id, seq, type, chunk, message_id)
SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[])
"""


async def group_commit_ceiling(url: str, total: int, *, run_rows: bool) -> Result:
    conn = await asyncpg.connect(url)
    tag = uuid.uuid4().hex[:6]
    runs = [f"ceiling-{tag}-{p}" for p in range(PRODUCERS_SINGLE)]
    await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in runs])
    seqs = dict.fromkeys(runs, 0)
    queue: list[tuple[str, str, asyncio.Future[None]]] = []
    wake = asyncio.Event()

    async def committer() -> None:
        while True:
            if not queue:
                wake.clear()
                await wake.wait()
                continue
            group = sorted(queue[:], key=lambda item: item[0])
            queue.clear()
            ids = [run for run, _, _ in group]
            texts = [text for _, text, _ in group]
            decoded = [orjson.loads(text) for text in texts]
            kinds = [c["type"] for c in decoded]
            messages = [c.get("messageId") for c in decoded]
            if run_rows:
                await conn.execute(CEILING_BUMP, ids, kinds, texts, messages)
            else:
                numbers = [seqs[run] + 1 for run in ids]
                await conn.execute(CEILING_INSERT, ids, numbers, kinds, texts, messages)
                for run, number in zip(ids, numbers, strict=True):
                    seqs[run] = number
            for _, _, future in group:
                future.set_result(None)

    task = asyncio.create_task(committer())
    loop = asyncio.get_running_loop()

    async def send(p: int, batch: list[dict[str, object]]) -> None:
        future = loop.create_future()
        queue.append((runs[p], orjson.dumps(batch[0]).decode(), future))
        wake.set()
        await future

    # Made (or taken from the cache) before the split starts counting this process's CPU.
    work = batches(total, 1)
    try:
        with cpu_split(url, "ceiling-bump" if run_rows else "ceiling-insert", total):
            return await drive(PRODUCERS_SINGLE, work, send)
    finally:
        task.cancel()
        await conn.close()


# Rounds of the single-chunk writer and the minimal group commit, each right after the
# other (see `paired_single`).
PAIRED_ROUNDS = 5


@dataclass
class Paired:
    """The single-chunk writer and the minimal group commit, a round each in turn."""

    rounds: list[tuple[Result, Result]]  # (writer, minimal group commit)

    @property
    def ratios(self) -> list[float]:
        return [writer[0] / minimal[0] for writer, minimal in self.rounds]

    @property
    def median(self) -> float:
        return statistics.median(self.ratios)

    def best(self) -> tuple[Result, Result]:
        """Each side's fastest round (as `measure` keeps its best)."""
        return (
            max((writer for writer, _ in self.rounds), key=lambda result: result[0]),
            max((minimal for _, minimal in self.rounds), key=lambda result: result[0]),
        )


def paired_single(url: str, total: int) -> tuple[Paired, dict[str, dict[str, float]]]:
    """The writer against the minimal group commit, `PAIRED_ROUNDS` rounds in turn.

    The machine's speed drifts within a minute, and the two compared a minute apart
    (the writer among the sizes' phases, the minimal commit after them) moved their
    ratio by a fifth from run to run. In turns, each round's pair meets the same
    machine; the ratio is the median of the rounds' own. Returns the rounds and the
    CPU split (see `cpu_split`) of the round with the median ratio."""
    rounds: list[tuple[Result, Result]] = []
    splits: list[dict[str, dict[str, float]]] = []
    for _ in range(PAIRED_ROUNDS):
        minimal = measure(url, 1, group_commit_ceiling, url, total, run_rows=True)
        writer = measure(url, 1, writer_bench, url, 1, total)
        rounds.append((writer, minimal))
        splits.append({phase: dict(SPLIT[phase]) for phase in ("writer", "ceiling-bump")})
    paired = Paired(rounds)
    middle = sorted(range(len(rounds)), key=lambda i: paired.ratios[i])[len(rounds) // 2]
    return paired, splits[middle]


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

        # The CPU split (beside the minimal group commit for single chunks; a side's in
        # `--writer-phase`), counted from after its work is made.
        work = batches(total, size)
        split = nullcontext() if one_run else cpu_split(url, "writer", total)
        with split:
            return await drive(producers, work, send)


async def http_bench(
    base: str, size: int, total: int, spread: int = 1, *, ndjson: bool = False
) -> Result:
    # A raw keep-alive client (a connection per producer): on 2 cores aiohttp
    # cost about as much CPU per request as the server, and httpx ~10x more.
    # `spread` connections per producer, each request on whichever is free: the
    # kernel hands each new connection to one worker, so against several workers
    # a connection per producer could leave one idle.
    producers = PRODUCERS_SINGLE if size == 1 else 4
    work = batches(total, size)
    poster = RawPoster(port_of(base), connections=producers * spread)
    await poster.open()
    try:
        runs = [f"http-{size}-{uuid.uuid4().hex[:6]}-{p}" for p in range(producers)]

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            path = f"/v1/runs/{runs[p]}/events"
            if ndjson:  # a chunk per line, as a producer streaming lines sends them
                lines = b"".join(orjson.dumps(c, option=orjson.OPT_APPEND_NEWLINE) for c in batch)
                await poster.post(path, lines, "application/x-ndjson")
            else:
                await poster.post(path, orjson.dumps({"events": batch}))

        # Create the runs outside the timing.
        await asyncio.gather(*(send(p, [chunk(0)]) for p in range(producers)))
        return await drive(producers, work, send)
    finally:
        await poster.close()


PEER_DIR = Path(__file__).resolve().parent / "peer"


@contextmanager
def peer_process() -> Iterator[int | None]:
    """The Durable Streams reference server (file store) on a free port; None without Node."""
    if shutil.which("node") is None:
        yield None
        return
    if not (PEER_DIR / "node_modules" / "@durable-streams" / "server").is_dir():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=PEER_DIR, check=True)
    with tempfile.TemporaryDirectory() as data:
        port = free_port()
        proc = subprocess.Popen(
            ["node", "server.mjs", str(port), data],
            cwd=PEER_DIR,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            for out in proc.stdout:
                if out.strip() == "ready":
                    break
            else:
                raise RuntimeError("the Durable Streams server did not start")
            yield port
        finally:
            proc.terminate()
            proc.wait(10)


async def peer_bench(port: int, size: int, total: int) -> Result:
    """The same load against the peer: a stream per producer, JSON arrays of chunks."""
    producers = PRODUCERS_SINGLE if size == 1 else 4
    work = batches(total, size)
    poster = RawPoster(port, connections=producers)
    await poster.open()
    try:
        streams = [f"/bench-{size}-{uuid.uuid4().hex[:6]}-{p}" for p in range(producers)]
        for stream in streams:
            await poster.request("PUT", stream)

        async def send(p: int, batch: list[dict[str, object]]) -> None:
            await poster.post(streams[p], orjson.dumps(batch))

        return await drive(producers, work, send)
    finally:
        await poster.close()


def process_cpu(base: str) -> float:
    """The serving process's CPU seconds so far, as its own /metrics tells them."""
    with urllib.request.urlopen(base + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("process_cpu_seconds_total "):
                return float(line.split()[1])
    raise RuntimeError("no process_cpu_seconds_total in /metrics")


def measure_cpu(
    url: str, base: str, events: int, phase: Callable[[], Result]
) -> tuple[Result, dict[str, float]]:
    """`phase()`, with the server's and its PostgreSQL backends' CPU per event (µs)."""
    database = url.rsplit("/", 1)[1]
    server, db = process_cpu(base), cpu_seconds(backends(database))
    result = phase()
    cpu = {
        "server": (process_cpu(base) - server) / events * 1e6,
        "db": (cpu_seconds(backends(database)) - db) / events * 1e6,
    }
    return result, cpu


def wait_for_workers(base: str, workers: int, seconds: float = 60) -> None:
    """Until `workers` processes answer /healthz (the first up answers alone at first)."""
    seen: set[int] = set()
    deadline = time.monotonic() + seconds
    while len(seen) < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(seen)} of {workers} workers answered")
        # A fresh connection each time: the kernel may hand it to any worker.
        with urllib.request.urlopen(base + "/healthz", timeout=5) as answer:
            seen.add(json.load(answer)["pid"])


def port_of(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def paced_http(base: str, rate: float, seconds: float) -> Result:
    """50 single-chunk producers, paced to `rate` events/s in all; latency from when due."""
    producers = PRODUCERS_SINGLE
    period = producers / rate
    latencies: list[float] = []
    poster = RawPoster(port_of(base), connections=producers)
    await poster.open()
    try:
        runs = [f"paced-{uuid.uuid4().hex[:6]}-{p}" for p in range(producers)]

        async def post(p: int, i: int) -> None:
            await poster.post(f"/v1/runs/{runs[p]}/events", orjson.dumps({"events": [chunk(i)]}))

        await asyncio.gather(*(post(p, 0) for p in range(producers)))
        start = time.perf_counter() + 0.05
        sent = int(seconds / period)

        async def producer(p: int) -> None:
            for i in range(sent):
                due = start + (i + p / producers) * period
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                await post(p, i)
                latencies.append((time.perf_counter() - due) * 1000)

        await asyncio.gather(*(producer(p) for p in range(producers)))
        return sent * producers / (time.perf_counter() - start), latencies
    finally:
        await poster.close()


def line(label: str, rate: float, lat: list[float], base: float | None) -> str:
    ratio = f"{rate / base:6.1%} of raw" if base else ""
    p50, p99 = pct(lat, 50), pct(lat, 99)
    return f"  {label:<28} {rate:>10,.0f} ev/s   p50 {p50:6.2f} ms  p99 {p99:6.2f} ms  {ratio}"


def measure(
    url: str, runs: int, phase: Callable[..., Awaitable[Result]], *args: Any, **kwargs: Any
) -> Result:
    """`phase(*args, **kwargs)`'s best of `runs` (highest events/s), each after a checkpoint."""
    results = []
    for _ in range(runs):
        asyncio.run(checkpoint(url))
        results.append(asyncio.run(phase(*args, **kwargs)))
    return max(results, key=lambda result: result[0])


async def check_durable(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        sync = await conn.fetchval("SHOW synchronous_commit")
        return f"synchronous_commit={sync}, fsync={await conn.fetchval('SHOW fsync')}"
    finally:
        await conn.close()


# -- side by side: this checkout against another (`--baseline DIR`) ----------------------


@dataclass
class Side:
    """One side of a side-by-side run: a checkout's server, its database, its settings."""

    name: str
    root: Path
    url: str
    base: str
    env: dict[str, str]

    @property
    def pid(self) -> int:
        """The serving process (one process: `serve` without workers)."""
        with urllib.request.urlopen(self.base + "/healthz", timeout=10) as answer:
            pid: int = json.load(answer)["pid"]
            return pid


def side_phase(side: Side, phase: str, size: int, total: int) -> dict[str, float]:
    """One phase on one side: its events/s, latencies, and CPU per event (µs) of the
    server (or the writer's process) and of its PostgreSQL backends."""
    if phase == "writer":
        # In a process of the side's own code, as its server would run the log.
        _, code = command(side.root)
        done = subprocess.run(
            [sys.executable, __file__, "--writer-phase", side.url, str(size), str(total)],
            env={**os.environ, **side.env, **code},
            cwd=side.root,
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
        return figures
    asyncio.run(checkpoint(side.url))
    database = side.url.rsplit("/", 1)[1]
    pid = side.pid
    server, db = cpu_seconds([pid]), cpu_seconds(backends(database))
    rate, latencies = asyncio.run(http_bench(side.base, size, total, ndjson=phase == "http-ndjson"))
    # Each producer's run is also created with one chunk.
    events = total + (PRODUCERS_SINGLE if size == 1 else 4)
    return {
        "events_per_s": rate,
        "p50_ms": pct(latencies, 50),
        "p99_ms": pct(latencies, 99),
        "cpu_us": (cpu_seconds([pid]) - server) / events * 1e6,
        "db_cpu_us": (cpu_seconds(backends(database)) - db) / events * 1e6,
    }


def writer_phase(url: str, size: int, total: int) -> None:
    """`--writer-phase`: the in-process writer at `size`, its figures as a JSON line."""
    rate, latencies = asyncio.run(writer_bench(url, size, total))
    split = SPLIT["writer"]
    print(
        json.dumps(
            {
                "events_per_s": rate,
                "p50_ms": pct(latencies, 50),
                "p99_ms": pct(latencies, 99),
                "cpu_us": split["process"],
                "db_cpu_us": split["db"],
            }
        )
    )


def side_by_side(
    baseline: Path,
    baseline_env: dict[str, str],
    rounds: int,
    totals: dict[int, int],
    ours_env: dict[str, str] | None = None,
    ours_database: str | None = None,
    kinds: Sequence[str] = ("http-json", "http-ndjson", "writer"),
) -> dict[str, Any]:
    """Every phase of the service on this checkout and on `baseline`, in turns (ABAB);
    `ours_database`: our side's (migrated) database instead of a scratch one."""
    phases = [(kind, size) for kind in kinds for size in totals]
    found: dict[str, dict[str, list[dict[str, float]]]] = {
        f"{phase}-{size}": {"ours": [], "baseline": []} for phase, size in phases
    }
    with (
        nullcontext(ours_database) if ours_database else scratch_database() as ours_url,
        scratch_database(None if baseline == ROOT else baseline) as base_url,
        server_process(ours_url, **(ours_env or {})) as ours_base,
        server_process(base_url, root=baseline, **baseline_env) as base_base,
    ):
        sides = [
            Side("ours", ROOT, ours_url, ours_base, ours_env or {}),
            Side("baseline", baseline, base_url, base_base, baseline_env),
        ]
        print(f"append, side by side ({asyncio.run(check_durable(ours_url))}): {rounds} rounds")
        for round_ in range(rounds):
            order = sides if round_ % 2 == 0 else sides[::-1]
            print(f"  round {round_ + 1}/{rounds} ({', then '.join(s.name for s in order)}), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
            for phase, size in phases:
                for side in order:
                    figures = side_phase(side, phase, size, totals[size])
                    found[f"{phase}-{size}"][side.name].append(figures)
    out: dict[str, Any] = {}
    ours_with = " ".join(f"{k}={v}" for k, v in (ours_env or {}).items())
    print(f"ours{' with ' if ours_with else ''}{ours_with}"
          f" ÷ baseline ({baseline}{' with ' if baseline_env else ''}"
          f"{' '.join(f'{k}={v}' for k, v in baseline_env.items())}), per round and median; "
          "events/s higher is better, CPU per event lower is")  # fmt: skip
    for name, by in found.items():
        ours, base = by["ours"], by["baseline"]
        entry: dict[str, Any] = {"ours": ours, "baseline": base}
        cells = []
        for key, what in (("events_per_s", "ev/s"), ("cpu_us", "CPU"), ("db_cpu_us", "db")):
            pairs = zip(ours, base, strict=True)
            ratios = [a[key] / b[key] if b[key] else float("nan") for a, b in pairs]
            entry[f"{key}_ratio"] = ratios
            cells.append(
                f"{what} {statistics.median(ratios):.2f} ("
                + " ".join(f"{r:.2f}" for r in ratios) + ")"
            )  # fmt: skip
        out[name] = entry
        who = "process" if name.startswith("writer") else "server"
        print(
            f"  {name:<17} ours {statistics.median(a['events_per_s'] for a in ours):>9,.0f} ev/s "
            f"{who} {statistics.median(a['cpu_us'] for a in ours):6.2f} µs, baseline "
            f"{statistics.median(b['events_per_s'] for b in base):>9,.0f} ev/s "
            f"{statistics.median(b['cpu_us'] for b in base):6.2f} µs | " + ", ".join(cells)
        )
        print(
            f"  {'':<17} latency p50/p99 ms: ours "
            f"{statistics.median(a['p50_ms'] for a in ours):.2f}/"
            f"{statistics.median(a['p99_ms'] for a in ours):.2f}, baseline "
            f"{statistics.median(b['p50_ms'] for b in base):.2f}/"
            f"{statistics.median(b['p99_ms'] for b in base):.2f}"
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer events (a smoke run)")
    parser.add_argument("--json", type=Path, help="write the figures and ratios here")
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="also over HTTP to `agent-replay serve --workers N` (default 2; 1: not)",
    )
    parser.add_argument(
        "--baseline", type=Path, metavar="DIR",
        help="side by side: the service's phases on this checkout and on DIR's, in turns",
    )  # fmt: skip
    parser.add_argument(
        "--baseline-env", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of the baseline's alone (without --baseline: this checkout with it)",
    )  # fmt: skip
    parser.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE",
        help="a setting of ours alone (without --baseline: this checkout without it)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="side-by-side rounds (default 3)")
    parser.add_argument(
        "--sizes", default="1,10,100,1000", metavar="N,N",
        help="side by side: only these chunks per append (default 1,10,100,1000)",
    )  # fmt: skip
    parser.add_argument(
        "--database-url", metavar="URL",
        help="side by side: our side on this migrated database (e.g. a Citus coordinator's)",
    )  # fmt: skip
    parser.add_argument("--phases", help="side by side: only these (http-json,http-ndjson,writer)")
    args = parser.parse_args()
    scale = 0.2 if args.quick else 1.0
    totals = {
        1: int(20_000 * scale),
        10: int(50_000 * scale),
        100: int(200_000 * scale),
        1000: int(400_000 * scale),
    }
    kinds = args.phases.split(",") if args.phases else ["http-json", "http-ndjson", "writer"]
    baseline_env = dict(item.split("=", 1) for item in args.baseline_env)
    ours_env = dict(item.split("=", 1) for item in args.env)
    if (baseline_env or ours_env or args.database_url) and args.baseline is None:
        args.baseline = ROOT
    if args.baseline is not None:
        args.baseline = args.baseline.resolve()
        if not is_checkout(args.baseline):
            parser.error(f"--baseline {args.baseline} is not a checkout of this repository")
        wanted = {int(size) for size in args.sizes.split(",")}
        if not wanted <= set(totals):
            parser.error(f"--sizes: each of {', '.join(map(str, totals))}")
        chosen = {size: n for size, n in totals.items() if size in wanted}
        phases = side_by_side(
            args.baseline, baseline_env, args.rounds, chosen, ours_env, args.database_url, kinds
        )
        if args.json:
            figures = {"baseline": str(args.baseline), "baseline_env": baseline_env,
                       "env": ours_env, "ours_database": args.database_url,
                       "rounds": args.rounds, "phases": phases}  # fmt: skip
            write_json(str(args.json), figures)
        return
    repeats = {1000: 2}
    with scratch_database() as url:
        print(f"append benchmark ({asyncio.run(check_durable(url))})")
        layout = asyncio.run(raw_tables(url))
        results: dict[int, dict[str, tuple[float, list[float]]]] = {}
        for size, total in totals.items():
            n = repeats.get(size, 1)
            results[size] = {
                method: measure(url, n, raw_baseline, url, size, total, method)
                for method in RAW_TABLE
            }
            if size > 1:  # single chunks: beside the minimal group commit, below
                results[size]["writer"] = measure(url, n, writer_bench, url, size, total)
        sizes = asyncio.run(bytes_per_event(url))
        one = totals[1]
        in_process, split = paired_single(url, one)
        results[1]["writer"], results[1]["ceiling-bump"] = in_process.best()
        SPLIT.update(split)
        results[1]["ceiling-insert"] = measure(
            url, 1, group_commit_ceiling, url, one, run_rows=False
        )
        results[1]["writer-one"] = measure(url, 1, writer_bench, url, 1, one, one_run=True)
        http_cpu: dict[int, dict[str, float]] = {}
        with server_process(url) as base:
            for size, total in totals.items():
                runs = repeats.get(size, 1)
                # Each run also creates its producers' runs with one chunk each.
                events = runs * (total + (PRODUCERS_SINGLE if size == 1 else 4))
                results[size]["http"], http_cpu[size] = measure_cpu(
                    url,
                    base,
                    events,
                    functools.partial(measure, url, runs, http_bench, base, size, total),
                )
            paced = measure(url, 1, paced_http, base, 2500, 8 * scale)
            for size, total in totals.items():
                if size > 1:  # a single chunk is a line either way
                    runs = repeats.get(size, 1)
                    results[size]["http-ndjson"] = measure(
                        url, runs, functools.partial(http_bench, ndjson=True), base, size, total
                    )
        if args.workers > 1:
            with server_process(url, REPLAY_WORKERS=str(args.workers)) as base:
                wait_for_workers(base, args.workers)
                for size, total in totals.items():
                    runs = repeats.get(size, 1)
                    results[size]["http-workers"] = measure(
                        url, runs, http_bench, base, size, total, 4
                    )
        with peer_process() as peer:
            for size, total in totals.items():
                if peer is not None:
                    runs = repeats.get(size, 1)
                    results[size]["peer"] = measure(url, runs, peer_bench, peer, size, total)
    print(
        "bytes per event stored: "
        + ", ".join(f"{table} {size:,.0f}" for table, size in sizes.items())
        + f'; "of raw" below: of the raw limit of the log\'s layout ({LAYOUTS[layout]})'
    )
    for size in totals:
        r = results[size]
        raw = raw_limit(r, layout)
        producers = PRODUCERS_SINGLE if size == 1 else 4
        best = " (better of 2 runs each)" if size in repeats else ""
        what = f"{producers} concurrent producers, {totals[size]:,} events"
        print(f"batch of {size} ({what}){best}")
        print(line("raw asyncpg unnest", *r["unnest"], None))
        print(line("raw asyncpg COPY", *r["copy"], None))
        print(line("raw batch rows", *r["batch"], None))
        print(line("raw batch rows, lz4", *r["batch-lz4"], None))
        if size == 1:
            print(line("raw group commit, run rows", *r["ceiling-bump"], None))
            print(line("raw group commit, no runs", *r["ceiling-insert"], None))
            print(line("in-process writer", *r["writer"], raw))
            ratios = ", ".join(f"{ratio:.0%}" for ratio in in_process.ratios)
            print(
                f"  {'':<28} {in_process.median:>10.1%} of the raw group commit "
                f"(median of {len(in_process.ratios)} rounds in turn: {ratios})"
            )
            writer, minimal = SPLIT["writer"], SPLIT["ceiling-bump"]
            print(
                f"  {'':<28} CPU per event: this process {writer['process']:.1f} µs, "
                f"PostgreSQL {writer['db']:.1f} µs (the raw group commit: "
                f"{minimal['process']:.1f} µs, {minimal['db']:.1f} µs)"
            )
            print(line("in-process, all on one run", *r["writer-one"], raw))
            print(line("HTTP POST /events", *r["http"], raw))
            print(line("HTTP paced to 2,500 ev/s", *paced, None))
        else:
            print(line("in-process writer", *r["writer"], raw))
            print(line("HTTP POST /events", *r["http"], raw))
            print(line("HTTP, the same as NDJSON", *r["http-ndjson"], raw))
        cpu = http_cpu[size]
        raw_db = RAW_DB_CPU.get((size, "batch-lz4"))
        raw_note = (
            f" (raw batch rows, lz4: {sum(raw_db) / len(raw_db) * 1e6:.2f} µs)" if raw_db else ""
        )
        print(
            f"  {'':<28} CPU per event over HTTP: server {cpu['server']:.2f} µs, "
            f"PostgreSQL {cpu['db']:.2f} µs" + raw_note
        )
        if "http-workers" in r:
            print(line(f"HTTP, {args.workers} workers", *r["http-workers"], raw))
        if "peer" in r:
            print(line("Durable Streams server", *r["peer"], raw))
            print(f"  {'':<28} HTTP is {r['http'][0] / r['peer'][0]:>6.0%} of the peer")
            if "http-ndjson" in r:
                ndjson = r["http-ndjson"][0] / r["peer"][0]
                print(f"  {'':<28} as NDJSON {ndjson:>6.0%} of the peer")
            if "http-workers" in r:
                print(
                    f"  {'':<28} with {args.workers} workers "
                    f"{r['http-workers'][0] / r['peer'][0]:>6.0%} of the peer"
                )
        else:
            print("  Durable Streams server: skipped (no node on PATH)")

    figures = {
        "http_vs_peer": {
            str(size): r["http"][0] / r["peer"][0] for size, r in results.items() if "peer" in r
        },
        "http_vs_raw": {"1000": results[1000]["http"][0] / raw_limit(results[1000], layout)},
        "http_ndjson_vs_peer": {
            str(size): r["http-ndjson"][0] / r["peer"][0]
            for size, r in results.items()
            if "peer" in r and "http-ndjson" in r
        },
        "workers": args.workers,
        "http_workers_vs_peer": {
            str(size): r["http-workers"][0] / r["peer"][0]
            for size, r in results.items()
            if "peer" in r and "http-workers" in r
        },
        "http_workers_vs_raw": {
            str(size): r["http-workers"][0] / raw_limit(r, layout)
            for size, r in results.items()
            if "http-workers" in r
        },
        "layout": layout,
        "in_process_vs_group_commit": in_process.median,
        "in_process_vs_group_commit_rounds": in_process.ratios,
        "events_per_second": {
            str(size): {phase: round(rate) for phase, (rate, _) in r.items()}
            for size, r in results.items()
        },
        "bytes_per_event": {table: round(size, 1) for table, size in sizes.items()},
        "cpu_us_per_event": {
            "http": {
                str(size): {who: round(us, 3) for who, us in cpu.items()}
                for size, cpu in http_cpu.items()
            },
            "in_process_1": {
                phase: {who: round(us, 3) for who, us in split.items()}
                for phase, split in SPLIT.items()
            },
            "raw_batch_lz4_db": {
                str(size): round(sum(per) / len(per) * 1e6, 3)
                for (size, method), per in RAW_DB_CPU.items()
                if method == "batch-lz4"
            },
        },
    }
    figures["events_per_second"]["1"]["http-paced"] = round(paced[0])
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--writer-phase"]:
        writer_phase(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        main()
