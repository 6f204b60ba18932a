"""Retention: delete closed runs (events, projections, run rows) older than a date.

Whole months first: `events` is partitioned by its run's creation month
(agent_replay.log.partitions), so a past month whose runs are all closed before
the date (and that no fork of a later month reads from) loses its run rows in
small batches and then its partition is detached and dropped whole: no
per-event WAL, no dead tuples, the space back at once, appends untouched. A
month still holding an open run (or one closed at or after the date, or a
fork's source) is kept: nothing is closed on anyone's behalf, the month is
reported as held, and its closed runs past the date go row by row like the
runs of the months still filling. An open run left for months is for its
owner (or `replay cancel`) to close; then the month goes at the next prune.

Row deletion goes in small transactions so no lock is held for long and live
appends are never stalled behind it: runs are taken a batch at a time
(oldest closed first, via the partial index on `closed_at`), and a run with
more events than one batch loses them in seq ranges first. The run row goes
last, in the same transaction as its remaining events, so an interrupted
prune leaves at worst a closed run missing its oldest events, which the next
prune finishes. Closed runs never take appends, so nothing races the delete.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, cast

import asyncpg

from agent_replay.log import partitions
from agent_replay.log.faults import translated
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import PruneReport

_PICK = QUERIES["pick_prunable"]
_COUNT = QUERIES["count_prunable"]
_DELETE_RANGE = QUERIES["delete_event_range"]
_DELETE_RUNS = QUERIES["delete_runs"]
_DATABASE_MONTH = QUERIES["database_month"]
_MONTH_STATE = QUERIES["month_state"]
_DELETE_MONTH_RUNS = QUERIES["delete_month_runs"]
_CITUS_MONTH_STATE = QUERIES["citus_month_state"]
_CITUS_MONTH_FORKED = QUERIES["citus_month_forked"]

_ACTION = "closed runs cannot be pruned"


@dataclass(frozen=True, slots=True)
class _Month:
    partition: partitions.Partition
    runs: int
    events: int


async def _month_state(
    pool: asyncpg.Pool, month: date, closed_before: datetime, citus: bool
) -> Mapping[str, Any] | None:
    if not citus:
        row = await pool.fetchrow(_MONTH_STATE, month, closed_before)
        return None if row is None else cast(Mapping[str, Any], row)
    # On Citus its check for forks across months goes apart: Citus cannot push a
    # subquery down beside aggregates.
    async with pool.acquire() as conn, conn.transaction():
        state = await conn.fetchrow(_CITUS_MONTH_STATE, month, closed_before)
        forked = await conn.fetchval(_CITUS_MONTH_FORKED, month)
    return None if state is None else {**state, "forked": forked}


async def _months(
    pool: asyncpg.Pool, closed_before: datetime, report: PruneReport, citus: bool = False
) -> list[_Month]:
    """The past months whose partitions can go whole; the others noted in `report.held`."""
    current: date = await pool.fetchval(_DATABASE_MONTH)
    whole = []
    for partition in await partitions.partitions(pool):
        if partition.month >= current:
            continue  # runs are still created in it
        state = await _month_state(pool, partition.month, closed_before, citus)
        assert state is not None
        why = [
            f"{state[key]} {what}"
            for key, what in (("open", "open"), ("recent", "closed since the date"))
            if state[key]
        ]
        if state["forked"]:
            why.append("forks of later months read from it")
        if why:
            report.held[partition.month] = ", ".join(why)
            continue
        whole.append(_Month(partition, state["runs"], state["events"]))
    return whole


async def count_prunable(
    pool: asyncpg.Pool, closed_before: datetime, *, citus: bool = False
) -> PruneReport:
    with translated(_ACTION):
        row = await pool.fetchrow(_COUNT, closed_before)
        assert row is not None
        report = PruneReport(row["runs"], row["events"], row["oldest"], row["newest"])
        months = await _months(pool, closed_before, report, citus)
        report.partitions = [m.partition.month for m in months]
    return report


async def prune(
    pool: asyncpg.Pool,
    closed_before: datetime,
    *,
    batch_events: int = 10_000,
    batch_runs: int = 500,
    max_rate: float | None = None,
    progress: Callable[[PruneReport], None] | None = None,
    whole_months: bool = True,
    citus: bool = False,
) -> PruneReport:
    """Delete closed runs with closed_at < closed_before; returns what went.

    `max_rate` (events per second) paces the transactions: deleting is WAL
    and I/O the appends' commits share, so an unpaced prune slows them
    (ops/bench/prune.py measures by how much). Dropping a month's partition
    needs no pacing. `whole_months` False: every run row by row (for comparison).
    """
    pace = _Pace(max_rate)
    with translated(_ACTION):
        return await _prune(
            pool, closed_before, batch_events, batch_runs, pace, progress, whole_months, citus
        )


class _Pace:
    """Sleeps so that the events deleted so far took at least `events / rate` seconds."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate if rate and rate > 0 else None
        self.started = time.monotonic()

    async def after(self, report: PruneReport) -> None:
        if self.rate is None:
            return
        ahead = report.events / self.rate - (time.monotonic() - self.started)
        if ahead > 0:
            await asyncio.sleep(ahead)


async def _prune(
    pool: asyncpg.Pool,
    closed_before: datetime,
    batch_events: int,
    batch_runs: int,
    pace: _Pace,
    progress: Callable[[PruneReport], None] | None,
    whole_months: bool,
    citus: bool,
) -> PruneReport:
    report = PruneReport()
    before = await count_prunable(pool, closed_before, citus=citus)
    report.oldest, report.newest = before.oldest, before.newest
    if whole_months:
        await _drop_months(pool, closed_before, batch_runs, report, citus)
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
                    report.events += await pool.fetchval(_DELETE_RANGE, run_id, upto)
                    report.batches += 1
                    await pace.after(report)
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
        await pace.after(report)


async def _drop_months(
    pool: asyncpg.Pool,
    closed_before: datetime,
    batch_runs: int,
    report: PruneReport,
    citus: bool,
) -> None:
    for month in await _months(pool, closed_before, report, citus):
        key = month.partition.month
        while True:
            gone = await pool.fetchval(_DELETE_MONTH_RUNS, key, closed_before, batch_runs)
            report.runs += gone
            report.batches += 1
            if not gone:
                break
        if await partitions.drop(pool, month.partition, citus=citus):
            report.events += month.events
            report.partitions.append(key)
    current: date = await pool.fetchval(_DATABASE_MONTH)
    await partitions.drop_leftovers(pool, current)
