"""What each append statement costs PostgreSQL per event, side by side in one run.

    python ops/bench/statement.py [--runs 37] [--statements 1500] [--rounds 3] [--json FILE]

One connection commits the same group over and over, each group shape through the one
general statement (`append`: its plain shares by the update of counts and expected
seqs alone, the others by the full one) and through each variant made for that shape:

* tokens: one event for each of `--runs` runs (a hosted run's tokens arrive so: a group
  holds one token of each of many runs), with each run's expected seq and without;
  variants `append_plain` and `append_ones`;
* the same group where one run's token is a tool call's start (its share records the
  tool's name); variants `append_tools` and `append_ones`;
* one run's 1,000 events, a row each (the row-per-event layout's large append, which
  the writer sends by COPY from 1,000 rows on); variant `bump` then COPY.

A variant earns its place only if it saves at least 15% of PostgreSQL's CPU per event
against the general statement on the same group (issue #47).

No other process listens, so no statement queues a NOTIFY (as in a lone process).

The figure is the backend's CPU (utime + stime from /proc) per event stored,
which, unlike wall time, counts only the server's own work, so a busy machine
changes it little; beside it, this process's CPU per event (binding the group's
rows, sending the statement and reading its answer: what the writer's event loop
pays) and the wall time per statement. The targets take turns within each round
(the order rotated every round); each prints its median over the rounds and the
median (and quartiles) of its ratio to the general statement's on the same group
in the same round: on a shared machine whose load drifts, the pairs are what
compare. Commits are durable
(`synchronous_commit` as the server has it), as the log's are. The connection has
the commit lanes' session settings (`writer.COMMIT_SETTINGS`), so the statements
run on the plans the lanes' do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
import orjson
from common import cpu_seconds, scratch_database

from agent_replay.log import sql
from agent_replay.log.chunks import StoredChunk
from agent_replay.log.request import EventRows, ones_columns
from agent_replay.log.writer import COMMIT_SETTINGS

CHUNK = orjson.dumps(
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "tokens "}
).decode()
TOKEN = StoredChunk("TEXT_MESSAGE_CONTENT", CHUNK, "m1", None)

# The committing process: no other one listens (no NOTIFY).
_PROCESS = "statement-bench"

# A target commits its group once, given the connection and each run's seq before it.
Commit = Callable[[asyncpg.Connection, dict[str, int]], Awaitable[list[asyncpg.Record]]]


@dataclass
class Shape:
    runs: list[str]
    events: EventRows
    targets: dict[str, Commit]  # the first: the general statement
    per_group: int  # events per group
    scale: int = 1  # this shape's groups per round: `--statements` // scale


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _general(events: EventRows, runs: list[str], *, expected: bool, tool: bool) -> Commit:
    """`append` as the writer sends it: plain shares in $5-$7, the tool share in $3-$4."""

    async def commit(conn: asyncpg.Connection, seqs: dict[str, int]) -> list[asyncpg.Record]:
        rich = runs[:1] if tool else []
        plain = runs[1:] if tool else runs
        counts = {run: len(events.rows) // len(runs) for run in plain}
        requests = {
            run: {"n": 1, "tools": ["search"], **({"expected": seqs[run] + 1} if expected else {})}
            for run in rich
        }
        given = {run: seqs[run] + 1 for run in plain} if expected else {}
        params = (_dumps(requests), rich, _dumps(counts), plain, _dumps(given), _PROCESS)
        return list(await conn.fetch(sql.APPEND, *events.params(), *params))

    return commit


def _plain(events: EventRows, runs: list[str], *, expected: bool) -> Commit:
    async def commit(conn: asyncpg.Connection, seqs: dict[str, int]) -> list[asyncpg.Record]:
        counts = _dumps(dict.fromkeys(runs, 1))
        given = _dumps({run: seqs[run] + 1 for run in runs}) if expected else "{}"
        params = (counts, runs, given, _PROCESS)
        return list(await conn.fetch(sql.APPEND_PLAIN, *events.params(), *params))

    return commit


def _tools(events: EventRows, runs: list[str]) -> Commit:
    async def commit(conn: asyncpg.Connection, seqs: dict[str, int]) -> list[asyncpg.Record]:
        counts = _dumps(dict.fromkeys(runs, 1))
        given = _dumps({run: seqs[run] + 1 for run in runs})
        tools = _dumps({runs[0]: ["search"]})
        params = (counts, runs, given, tools, _PROCESS)
        return list(await conn.fetch(sql.APPEND_TOOLS, *events.params(), *params))

    return commit


def _ones(events: EventRows, runs: list[str], *, expected: bool, tool: bool) -> Commit:
    async def commit(conn: asyncpg.Connection, seqs: dict[str, int]) -> list[asyncpg.Record]:
        columns = ones_columns(events.rows)
        assert columns is not None
        given = _dumps({run: seqs[run] + 1 for run in runs}) if expected else "{}"
        tools = _dumps({runs[0]: ["search"]}) if tool else "{}"
        return list(await conn.fetch(sql.APPEND_ONES, *columns, given, tools, _PROCESS))

    return commit


def _copy(events: EventRows, runs: list[str]) -> Commit:
    async def commit(conn: asyncpg.Connection, seqs: dict[str, int]) -> list[asyncpg.Record]:
        requests = _dumps({run: {"n": len(events.rows) // len(runs)} for run in runs})
        async with conn.transaction():
            rows = list(await conn.fetch(sql.BUMP, requests, runs))
            records = events.records(
                {row["run_id"]: row["base"] for row in rows},
                {row["run_id"]: row["run_month"] for row in rows},
            )
            await conn.copy_records_to_table(
                "events", records=records, columns=list(sql.EVENT_COLUMNS)
            )
        return rows

    return commit


def shapes(width: int) -> dict[str, Shape]:
    tokens = [f"statement-{i:04d}" for i in range(width)]
    rows = EventRows()
    for run in tokens:
        rows.add(run, [TOKEN], 0)
    called = [f"called-{i:04d}" for i in range(width)]
    called_rows = EventRows()
    for run in called:
        called_rows.add(run, [TOKEN], 0)
    bulk = ["bulk-0000"]
    bulk_rows = EventRows(batch_min=None)
    bulk_rows.add(bulk[0], [TOKEN] * 1000, 0)
    return {
        "tokens, expected seqs": Shape(tokens, rows, {
            "append": _general(rows, tokens, expected=True, tool=False),
            "append_plain": _plain(rows, tokens, expected=True),
            "append_ones": _ones(rows, tokens, expected=True, tool=False),
        }, width),
        "tokens": Shape(tokens, rows, {
            "append": _general(rows, tokens, expected=False, tool=False),
            "append_plain": _plain(rows, tokens, expected=False),
            "append_ones": _ones(rows, tokens, expected=False, tool=False),
        }, width),
        "tokens, one tool call": Shape(called, called_rows, {
            "append": _general(called_rows, called, expected=True, tool=True),
            "append_tools": _tools(called_rows, called),
            "append_ones": _ones(called_rows, called, expected=True, tool=True),
        }, width),
        "one run's 1,000 events": Shape(bulk, bulk_rows, {
            "append": _general(bulk_rows, bulk, expected=False, tool=False),
            "bump + COPY": _copy(bulk_rows, bulk),
        }, 1000, scale=15),
    }  # fmt: skip


async def measure(url: str, width: int, statements: int, rounds: int) -> dict[str, Any]:
    # With the commit lanes' session settings: the plans the lanes run on.
    conn = await asyncpg.connect(url, server_settings=dict(COMMIT_SETTINGS))
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        found = shapes(width)
        every = sorted({run for shape in found.values() for run in shape.runs})
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in every])
        seqs = dict.fromkeys(every, 0)
        names = [(group, target) for group, shape in found.items() for target in shape.targets]
        cpu: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}
        client: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}
        wall: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}

        async def once(shape: Shape, commit: Commit, name: str) -> None:
            rows = await commit(conn, seqs)
            if len(rows) != len(shape.runs):
                raise RuntimeError(f"{name}: {len(rows)} of {len(shape.runs)} runs applied")
            for run in shape.runs:
                seqs[run] += shape.per_group // len(shape.runs)

        for round_ in range(rounds):
            for group, target in names[round_ % len(names) :] + names[: round_ % len(names)]:
                shape, name = found[group], f"{group}: {target}"
                commit = shape.targets[target]
                count = max(1, statements // shape.scale)
                await once(shape, commit, name)  # planned
                start, used = time.perf_counter(), cpu_seconds([pid])
                own = time.process_time()
                for _ in range(count):
                    await once(shape, commit, name)
                stored = count * shape.per_group
                cpu[name].append((cpu_seconds([pid]) - used) / stored * 1e6)
                client[name].append((time.process_time() - own) / stored * 1e6)
                wall[name].append((time.perf_counter() - start) / count * 1e3)
        return {"cpu_us_per_event": cpu, "client_cpu_us_per_event": client,
                "wall_ms_per_statement": wall, "groups": {g: list(s.targets)
                                                          for g, s in found.items()}}  # fmt: skip
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
    # Each round's ratio to the general statement's figure of the same round (measured
    # next to it, on the same load), then their median and quartiles over the rounds.
    ratios: dict[str, float] = {}
    quartiles: dict[str, list[float]] = {}
    print(
        f"append statements: {args.statements} groups per target per round (1,000-event"
        f" groups: a fifteenth), {args.rounds} rounds; load {os.getloadavg()[0]:.1f}"
    )
    for group, targets in found["groups"].items():
        base = found["cpu_us_per_event"][f"{group}: {targets[0]}"]
        print(f"{group}:")
        for target in targets:
            name = f"{group}: {target}"
            paired = [v / b for v, b in zip(found["cpu_us_per_event"][name], base, strict=True)]
            ratios[name] = statistics.median(paired)
            quartiles[name] = (
                statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
            )
            low, _, high = quartiles[name]
            print(
                f"  {target:<14} PostgreSQL CPU {cpu[name]:6.1f} us/event  {ratios[name]:5.2f}x"
                f" the general statement (quartiles {low:.2f}-{high:.2f})   client CPU"
                f" {client[name]:5.1f} us/event   wall {wall[name]:.2f} ms/statement"
            )
    if args.json:
        report = {
            "runs_per_group": args.runs,
            "cpu_us_per_event": cpu,
            "client_cpu_us_per_event": client,
            "wall_ms_per_statement": wall,
            "ratio_to_general": ratios,
            "ratio_quartiles": quartiles,
            "rounds": found,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
