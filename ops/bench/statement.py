"""What the append statements cost PostgreSQL per event, side by side in one run.

    python ops/bench/statement.py [--runs 37] [--statements 1500] [--rounds 3] [--json FILE]

One connection commits the same group over and over, for each shape of group through
the general statement (`append`, which takes any group: its plain shares by the update
of counts and expected seqs alone, the others by the full one) and through the one the
commit lanes send it (`Group.statement`), where that is another:

* tokens: one event for each of `--runs` runs (a hosted run's tokens arrive so: a group
  holds one token of each of many runs), with each run's expected seq and without
  (`append_ones`);
* the same group where one run's token is a tool call's start (its share records the
  tool's name; `append_ones`);
* one run's 1,000 events, a row each (the row-per-event layout's large append; `append`).

A variant of `append` earns its place only if it saves at least 15% of PostgreSQL's CPU
per event against `append` on the same group (issue #47): `append_plain`,
`append_tools` and `bump` then COPY did not, and went (this script as of commit
3b0ad80 compared them; docs/benchmarks.md).

No other process listens, so no statement queues a NOTIFY (as in a lone process).

The figure is the backend's CPU (utime + stime from /proc) per event stored,
which, unlike wall time, counts only the server's own work, so a busy machine
changes it less; beside it, this process's CPU per event (making the group's
statement and parameters, sending it and reading its answer: what the writer's
event loop pays) and the wall time per statement. The targets take turns within
each round (the order rotated every round); each prints its median over the
rounds and the median (and quartiles) of its ratio to `append`'s on the same
group in the same round: on a machine whose load drifts, the pairs are what
compare. Commits are durable (`synchronous_commit` as the server has it), as the
log's are. The connection has the commit lanes' session settings
(`writer.COMMIT_SETTINGS`), so the statements run on the plans the lanes' do.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
from common import cpu_seconds, scratch_database

from agent_replay.log import sql
from agent_replay.log.chunks import stored
from agent_replay.log.request import Group, Pending
from agent_replay.log.values import StoredChunk
from agent_replay.log.writer import COMMIT_SETTINGS

TOKEN = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "tokens "}
CALL = {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search"}

# The committing process: no other one listens (no NOTIFY).
_PROCESS = "statement-bench"


@dataclass
class Shape:
    # Each run's chunks in the group.
    chunks: dict[str, list[StoredChunk]]
    expected: bool  # each run's append states its expected seq
    batch_min: int | None = None  # the row-per-event layout
    scale: int = 1  # this shape's groups per round: `--statements` // scale

    @property
    def per_group(self) -> int:
        return sum(map(len, self.chunks.values()))

    def group(self, seqs: dict[str, int], loop: asyncio.AbstractEventLoop) -> Group:
        future = loop.create_future()
        appends = {
            run: [Pending(run, chunks, seqs[run] + 1 if self.expected else None, False, False,
                          None, future)]
            for run, chunks in self.chunks.items()
        }  # fmt: skip
        return Group.of(appends, self.batch_min)


def shapes(width: int) -> dict[str, Shape]:
    token = [stored(TOKEN, 0)]
    tokens = {f"statement-{i:04d}": token for i in range(width)}
    called = {f"called-{i:04d}": [stored(CALL, 0)] if i == 0 else token for i in range(width)}
    return {
        "tokens, expected seqs": Shape(tokens, expected=True),
        "tokens": Shape(tokens, expected=False),
        "tokens, one tool call": Shape(called, expected=True),
        "one run's 1,000 events": Shape({"bulk-0000": token * 1000}, expected=False, scale=15),
    }


async def measure(url: str, width: int, statements: int, rounds: int) -> dict[str, Any]:
    # With the commit lanes' session settings: the plans the lanes run on.
    conn = await asyncpg.connect(url, server_settings=dict(COMMIT_SETTINGS))
    loop = asyncio.get_running_loop()
    try:
        pid = await conn.fetchval("SELECT pg_backend_pid()")
        found = shapes(width)
        every = sorted({run for shape in found.values() for run in shape.chunks})
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in every])
        seqs = dict.fromkeys(every, 0)
        # (shape, target): `append`, and what the writer sends where that is another.
        names = [(shape, "append") for shape in found]
        for shape_name, shape in found.items():
            statement = shape.group(seqs, loop).statement(_PROCESS)[0]
            if statement != sql.APPEND:
                sent = next(name for name, query in sql.QUERIES.items() if query == statement)
                names.append((shape_name, sent))
        cpu: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}
        client: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}
        wall: dict[str, list[float]] = {f"{g}: {t}": [] for g, t in names}

        async def once(name: str, shape: Shape, sent: bool) -> None:
            group = shape.group(seqs, loop)
            statement, params = group.statement(_PROCESS) if sent else group.general(_PROCESS)
            rows = await conn.fetch(statement, *params)
            if len(rows) != len(shape.chunks):
                raise RuntimeError(f"{name}: {len(rows)} of {len(shape.chunks)} runs applied")
            for run, chunks in shape.chunks.items():
                seqs[run] += len(chunks)

        for round_ in range(rounds):
            for group, target in names[round_ % len(names) :] + names[: round_ % len(names)]:
                shape, name, sent = found[group], f"{group}: {target}", target != "append"
                count = max(1, statements // shape.scale)
                await once(name, shape, sent)  # planned
                start, used = time.perf_counter(), cpu_seconds([pid])
                own = time.process_time()
                for _ in range(count):
                    await once(name, shape, sent)
                events = count * shape.per_group
                cpu[name].append((cpu_seconds([pid]) - used) / events * 1e6)
                client[name].append((time.process_time() - own) / events * 1e6)
                wall[name].append((time.perf_counter() - start) / count * 1e3)
        targets: dict[str, list[str]] = {}
        for group, target in names:
            targets.setdefault(group, []).append(target)
        return {"cpu_us_per_event": cpu, "client_cpu_us_per_event": client,
                "wall_ms_per_statement": wall, "groups": targets}  # fmt: skip
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
    # Each round's ratio to `append`'s figure of the same round (measured next to it, on
    # the same load), then their median and quartiles over the rounds.
    ratios: dict[str, float] = {}
    quartiles: dict[str, list[float]] = {}
    print(
        f"append statements: {args.statements} groups per target per round (1,000-event"
        f" groups: a fifteenth), {args.rounds} rounds; load {os.getloadavg()[0]:.1f}"
    )
    for group, targets in found["groups"].items():
        base = found["cpu_us_per_event"][f"{group}: append"]
        print(f"{group}:")
        for target in targets:
            name = f"{group}: {target}"
            # (A round too short for the clock's ticks measures nothing: left out.)
            rounds = zip(found["cpu_us_per_event"][name], base, strict=True)
            paired = [v / b for v, b in rounds if b] or [float("nan")]
            ratios[name] = statistics.median(paired)
            quartiles[name] = (
                statistics.quantiles(paired, n=4) if len(paired) > 1 else [paired[0]] * 3
            )
            low, _, high = quartiles[name]
            print(
                f"  {target:<12} PostgreSQL CPU {cpu[name]:6.1f} us/event  {ratios[name]:5.2f}x"
                f" append (quartiles {low:.2f}-{high:.2f})   client CPU {client[name]:5.1f}"
                f" us/event   wall {wall[name]:.2f} ms/statement"
            )
    if args.json:
        report = {
            "runs_per_group": args.runs,
            "cpu_us_per_event": cpu,
            "client_cpu_us_per_event": client,
            "wall_ms_per_statement": wall,
            "ratio_to_append": ratios,
            "ratio_quartiles": quartiles,
            "rounds": found,
        }
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
