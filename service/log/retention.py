"""Retention: delete closed runs (events, projections, run rows) older than a date.

Deletion goes in small transactions so no lock is held for long and live
appends are never stalled behind it: runs are taken a batch at a time
(oldest closed first, via the partial index on `closed_at`), and a run with
more events than one batch loses them in seq ranges first. The run row goes
last, in the same transaction as its remaining events, so an interrupted
prune leaves at worst a closed run missing its oldest events, which the next
prune finishes. Closed runs never take appends, so nothing races the delete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

_PICK = """
SELECT run_id, last_seq FROM runs
WHERE closed_at IS NOT NULL AND closed_at < $1
ORDER BY closed_at, run_id LIMIT $2
"""

_COUNT = """
SELECT count(*) AS runs, coalesce(sum(last_seq), 0)::bigint AS events,
       min(closed_at) AS oldest, max(closed_at) AS newest
FROM runs WHERE closed_at IS NOT NULL AND closed_at < $1
"""

_DELETE_RANGE = "DELETE FROM events WHERE run_id = $1 AND seq <= $2"

_DELETE_RUNS = """
WITH gone AS (
    DELETE FROM runs WHERE run_id = ANY($1::text[]) AND closed_at < $2 RETURNING run_id
), projections AS (
    DELETE FROM run_projections WHERE run_id IN (SELECT run_id FROM gone)
), evs AS (
    DELETE FROM events WHERE run_id IN (SELECT run_id FROM gone) RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS runs, (SELECT count(*) FROM evs) AS events
"""


@dataclass(slots=True)
class PruneReport:
    runs: int = 0
    events: int = 0
    oldest: datetime | None = None
    newest: datetime | None = None
    batches: int = 0


async def count_prunable(pool: asyncpg.Pool, closed_before: datetime) -> PruneReport:
    row = await pool.fetchrow(_COUNT, closed_before)
    assert row is not None
    return PruneReport(row["runs"], row["events"], row["oldest"], row["newest"])


async def prune(
    pool: asyncpg.Pool,
    closed_before: datetime,
    *,
    batch_events: int = 10_000,
    batch_runs: int = 500,
    progress: Callable[[PruneReport], None] | None = None,
) -> PruneReport:
    """Delete closed runs with closed_at < closed_before; returns what went."""
    report = PruneReport()
    before = await count_prunable(pool, closed_before)
    report.oldest, report.newest = before.oldest, before.newest
    while True:
        picked = await pool.fetch(_PICK, closed_before, batch_runs)
        if not picked:
            return report
        batch: list[str] = []
        budget = batch_events
        for row in picked:
            run_id, last_seq = row["run_id"], row["last_seq"]
            if last_seq > batch_events:
                # A big run: its events go in seq ranges, a transaction each.
                for upto in range(batch_events, last_seq, batch_events):
                    status = await pool.execute(_DELETE_RANGE, run_id, upto)
                    report.events += int(status.split()[-1])
                    report.batches += 1
            elif last_seq > budget and batch:
                break
            batch.append(run_id)
            budget -= min(last_seq, batch_events)
        done = await pool.fetchrow(_DELETE_RUNS, batch, closed_before)
        assert done is not None
        if done["runs"] == 0:
            return report  # nothing left that qualifies (defensive: never loop)
        report.runs += done["runs"]
        report.events += done["events"]
        report.batches += 1
        if progress is not None:
            progress(report)
