"""What each append statement costs PostgreSQL per event, side by side in one run.

    python ops/bench/statement.py [--runs 37] [--statements 1500] [--rounds 3] [--json FILE]

One connection commits the same group over and over: one event for each of
`--runs` runs, each run's expected seq given, as a hosted run's tokens arrive
(a group holds one token of each of many runs). The group goes through:

* `append`: the full statement, which looks every field of a run's request up
  in its JSON (what such groups took until `append_plain` took expected seqs);
* `append` for a group of which one share has something to record (a tool
  name) and the rest are plain: those take its `append_plain`-like update;
* `append_tools` for that group (what it takes now: one share records only
  the tool it called, so no share needs the full update);
* `append_plain` with the expected seqs (what such a group of several chunks
  per run takes);
* `append_ones` with the expected seqs, and with the tool (what these groups,
  one chunk per run, take now);
* `append_plain` and `append_ones` without them (a plain stream's group).

No other process listens, so the plain statements queue no NOTIFY (as in a
lone process); `append` always does.

The figure is the backend's CPU (utime + stime from /proc) per event stored,
which, unlike wall time, counts only the server's own work, so a busy machine
changes it little; beside it, this process's CPU per event (binding the group's
rows, `EventRows.params`, sending the statement and reading its answer: what
the writer's event loop pays) and the wall time per statement. The targets
take turns within each round (the order rotated every round); each prints its
median over the rounds and its ratio to the full statement's. Commits are
durable (`synchronous_commit` as the server has it), as the log's are. The
connection has the commit lanes' session settings (`writer.COMMIT_SETTINGS`), so
the statements run on the plans the lanes' do.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
import orjson
from common import cpu_seconds, scratch_database

from agent_replay.log import sql
from agent_replay.log.request import EventRows, ones_columns
from agent_replay.log.values import StoredChunk
from agent_replay.log.writer import COMMIT_SETTINGS

CHUNK = orjson.dumps(
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "tokens "}
).decode()

# Each target: (statement, its parameters, given the group's rows, the runs and each
# run's seq before the group).
Params = Callable[[EventRows, list[str], dict[str, int]], tuple[Any, ...]]


def _full(events: EventRows, runs: list[str], seqs: dict[str, int]) -> tuple[Any, ...]:
    requests = {run: {"n": 1, "expected": seqs[run] + 1} for run in runs}
    return *events.params(), orjson.dumps(requests).decode(), runs, "{}", [], "{}"


def _one_rich(events: EventRows, runs: list[str], seqs: dict[str, int]) -> tuple[Any, ...]:
    # The first run's share records a tool name; the rest are plain, as `append` takes them.
    rich, plain = runs[:1], runs[1:]
    requests = {run: {"n": 1, "expected": seqs[run] + 1, "tools": ["search"]} for run in rich}
    expected = {run: seqs[run] + 1 for run in plain}
    return (
        *events.params(),
        orjson.dumps(requests).decode(),
        rich,
        orjson.dumps(dict.fromkeys(plain, 1)).decode(),
        plain,
        orjson.dumps(expected).decode(),
    )


_TOOL = orjson.dumps({"statement-0000": ["search"]}).decode()
# The committing process: no other one listens (no NOTIFY).
_PROCESS = "statement-bench"


def _one_tool(events: EventRows, runs: list[str], seqs: dict[str, int]) -> tuple[Any, ...]:
    # The same group as `_one_rich`'s, as `append_tools` takes it: every run's count and
    # expected seq, and the first run's tool apart.
    return (*_plain_expected(events, runs, seqs)[:-1], _TOOL, _PROCESS)


def _plain_expected(events: EventRows, runs: list[str], seqs: dict[str, int]) -> tuple[Any, ...]:
    expected = {run: seqs[run] + 1 for run in runs}
    counts = orjson.dumps(dict.fromkeys(runs, 1)).decode()
    return *events.params(), counts, runs, orjson.dumps(expected).decode(), _PROCESS


def _plain(events: EventRows, runs: list[str], seqs: dict[str, int]) -> tuple[Any, ...]:
    counts = orjson.dumps(dict.fromkeys(runs, 1)).decode()
    return *events.params(), counts, runs, "{}", _PROCESS


def _ones(
    events: EventRows, runs: list[str], seqs: dict[str, int], *, expected: bool, tool: bool
) -> tuple[Any, ...]:
    columns = ones_columns(events.rows)
    assert columns is not None
    given = orjson.dumps({run: seqs[run] + 1 for run in runs}).decode() if expected else "{}"
    return *columns, given, _TOOL if tool else "{}", _PROCESS


TARGETS: dict[str, tuple[str, Params]] = {
    "append, expected seqs": (sql.APPEND, _full),
    "append, one share not plain": (sql.APPEND, _one_rich),
    "append_tools, one tool share": (sql.APPEND_TOOLS, _one_tool),
    "append_plain, expected seqs": (sql.APPEND_PLAIN, _plain_expected),
    "append_ones, expected seqs": (
        sql.APPEND_ONES,
        functools.partial(_ones, expected=True, tool=False),
    ),
    "append_ones, one tool share": (
        sql.APPEND_ONES,
        functools.partial(_ones, expected=True, tool=True),
    ),
    "append_plain, none": (sql.APPEND_PLAIN, _plain),
    "append_ones, none": (sql.APPEND_ONES, functools.partial(_ones, expected=False, tool=False)),
}


async def measure(url: str, width: int, statements: int, rounds: int) -> dict[str, Any]:
    # With the commit lanes' session settings: the plans the lanes run on.
    conn = await asyncpg.connect(url, server_settings=dict(COMMIT_SETTINGS))
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        runs = [f"statement-{i:04d}" for i in range(width)]
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in runs])
        seqs = dict.fromkeys(runs, 0)
        token = StoredChunk("TEXT_MESSAGE_CONTENT", CHUNK, "m1", None)
        events = EventRows()
        for run in runs:
            events.add(run, [token], 0)
        cpu: dict[str, list[float]] = {name: [] for name in TARGETS}
        client: dict[str, list[float]] = {name: [] for name in TARGETS}
        wall: dict[str, list[float]] = {name: [] for name in TARGETS}
        names = list(TARGETS)
        for round_ in range(rounds):
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                statement, params = TARGETS[name]
                await conn.fetch(statement, *params(events, runs, seqs))  # planned
                seqs = {run: seq + 1 for run, seq in seqs.items()}
                start, used = time.perf_counter(), cpu_seconds([pid])
                own = time.process_time()
                for _ in range(statements):
                    rows = await conn.fetch(statement, *params(events, runs, seqs))
                    if len(rows) != width:
                        raise RuntimeError(f"{name}: {len(rows)} of {width} runs applied")
                    seqs = {run: seq + 1 for run, seq in seqs.items()}
                cpu[name].append((cpu_seconds([pid]) - used) / (statements * width) * 1e6)
                client[name].append((time.process_time() - own) / (statements * width) * 1e6)
                wall[name].append((time.perf_counter() - start) / statements * 1e3)
        return {"cpu_us_per_event": cpu, "client_cpu_us_per_event": client,
                "wall_ms_per_statement": wall}  # fmt: skip
    finally:
        await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=37, help="runs (one event each) per group")
    parser.add_argument("--statements", type=int, default=1500, help="per target per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with scratch_database() as url:
        found = asyncio.run(measure(url, args.runs, args.statements, args.rounds))
    cpu = {name: statistics.median(v) for name, v in found["cpu_us_per_event"].items()}
    wall = {name: statistics.median(v) for name, v in found["wall_ms_per_statement"].items()}
    client = {name: statistics.median(v) for name, v in found["client_cpu_us_per_event"].items()}
    base = cpu["append, expected seqs"]
    print(
        f"append statements: {args.runs} runs x 1 event per group, {args.statements} groups"
        f" per target per round, {args.rounds} rounds; load {os.getloadavg()[0]:.1f}"
    )
    for name in TARGETS:
        spread = ", ".join(f"{v:.1f}" for v in found["cpu_us_per_event"][name])
        print(
            f"  {name:<30} PostgreSQL CPU {cpu[name]:6.1f} us/event ({spread})"
            f"  {cpu[name] / base:5.2f}x the full statement   client CPU {client[name]:5.1f}"
            f" us/event   wall {wall[name]:.2f} ms/statement"
        )
    if args.json:
        report = {
            "runs_per_group": args.runs,
            "cpu_us_per_event": cpu,
            "client_cpu_us_per_event": client,
            "wall_ms_per_statement": wall,
            "ratio_to_full": {name: cpu[name] / base for name in TARGETS},
            "rounds": found,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
