"""What partitioning costs an insert: the same rows into a plain table, into the
partitioned `events` (PostgreSQL routes each row) and into its month's partition
named directly, by the append's two paths (INSERT ... SELECT FROM unnest, and COPY).

    python ops/bench/partition_insert.py [--rounds 7] [--events 20000] [--json FILE]

One process, one connection, one scratch database; the targets take turns within
each round (the order rotated every round), so a busy machine slows them alike
and the ratios hold where absolute rates do not. `synchronous_commit` is off:
this measures the server's CPU per row (routing, index, heap), not the disk's
fsync, which every target pays alike. Prints each target's median events/s per
batch size and path, and its ratio to the plain table's, with the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import asyncpg
from common import scratch_database

from agent_replay.log import partitions

COLUMNS = ["run_id", "seq", "type", "chunk", "message_id", "tool_call_id", "run_month"]
CHUNK = '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"' + "x" * 60 + '"}'

# As the append statement inserts: arrays unnested, the month one value per row.
UNNEST = """
INSERT INTO {table} (run_id, seq, type, chunk, message_id, tool_call_id, run_month)
SELECT e.run_id, e.seq, e.type, e.chunk, e.message_id, e.tool_call_id, $7::date
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[], $6::text[])
    AS e(run_id, seq, type, chunk, message_id, tool_call_id)
"""


async def one(
    conn: asyncpg.Connection, table: str, path: str, batch: int, events: int, tag: str
) -> float:
    """Events/s for `events` rows into `table` in transactions of `batch`."""
    month = partitions.month_of(datetime.now(UTC))
    statement = UNNEST.format(table=table)
    started = time.perf_counter()
    for start in range(0, events, batch):
        run = f"{tag}-{start // 1000}"
        seqs = list(range(start % 1000 + 1, start % 1000 + batch + 1))
        if path == "unnest":
            n = len(seqs)
            await conn.execute(
                statement, [run] * n, seqs, ["TEXT_MESSAGE_CONTENT"] * n, [CHUNK] * n,
                ["m"] * n, [None] * n, month,
            )  # fmt: skip
        else:
            records = [(run, s, "TEXT_MESSAGE_CONTENT", CHUNK, "m", None, month) for s in seqs]
            await conn.copy_records_to_table(table, records=records, columns=COLUMNS)
    return events / (time.perf_counter() - started)


async def measure(url: str, args: argparse.Namespace) -> dict[str, Any]:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("SET synchronous_commit = off")
        await conn.execute("CREATE TABLE plain_events (LIKE events INCLUDING ALL)")
        partition = partitions.name_of(partitions.month_of(datetime.now(UTC)))
        targets = {"plain": "plain_events", "parent": "events", "partition": partition}
        rates: dict[str, dict[str, dict[str, list[float]]]] = {}
        load_before = os.getloadavg()
        for batch in (10, 100, 1000):
            for path in ("unnest", "copy"):
                if path == "copy" and batch < 100:
                    continue  # the writer takes COPY from 1,000 events
                key = f"{path} x{batch}"
                rates[key] = {name: [] for name in targets}
                names = list(targets)
                for r in range(args.rounds):
                    for name in names[r % 3 :] + names[: r % 3]:
                        tag = f"{name}-{key}-{r}".replace(" ", "")
                        rate = await one(conn, targets[name], path, batch, args.events, tag)
                        rates[key][name].append(rate)
                    await conn.execute("TRUNCATE plain_events, events")
        report: dict[str, Any] = {"load_before": load_before, "load_after": os.getloadavg()}
        for key, by_target in rates.items():
            medians = {name: statistics.median(v) for name, v in by_target.items()}
            report[key] = {
                name: {
                    "events_per_second": medians[name],
                    "vs_plain": medians[name] / medians["plain"],
                    "range": [min(v), max(v)],
                }
                for name, v in by_target.items()
            }
        return report
    finally:
        await conn.close()


def show(report: dict[str, Any]) -> None:
    for key, by_target in report.items():
        if key.startswith("load"):
            continue
        cells = "  ".join(
            f"{name} {v['events_per_second']:>9,.0f}/s ({v['vs_plain']:.2f})"
            for name, v in by_target.items()
        )
        print(f"{key:<12} {cells}")
    print(f"load average: {report['load_before']} before, {report['load_after']} after")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--events", type=int, default=20_000, help="per target, round and size")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    with scratch_database() as url:
        report = asyncio.run(measure(url, args))
    show(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
