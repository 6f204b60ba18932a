"""Expiry: delete Durable Streams past their TTL or `Stream-Expires-At`, with their runs.

An expired stream answers 404 at once (`stream_lookup` judges expiry); this
sweep is what frees its rows. Each stream goes whole, in one transaction
with everything of it (run, events, producers, projection, fork link, and a
soft-deleted source it was the last fork of), so a failure at any point
leaves every stream either wholly there or wholly gone. Small streams share
a transaction up to `batch_events` events; a bigger one goes alone. Streams
are picked with SKIP LOCKED, so replicas sweeping at once split the work and
no sweep ever waits on a writer (appends to other runs take no lock it holds).

What forks need is kept: an expired stream that forks still read stays (404
to clients, its prefix still read by the forks) until its last fork is gone;
the next sweep then deletes it. A soft-deleted stream whose last fork went
another way (`agent-replay prune`) is swept the same way.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import asyncpg

from agent_replay.errors import ReplayError
from agent_replay.log.faults import translated
from agent_replay.log.sql import QUERIES

_PICK = QUERIES["stream_sweepable"]
_COUNT = QUERIES["stream_sweepable_count"]

_ACTION = "expired streams cannot be swept"

log = logging.getLogger("replay.log")

DeleteRun = Callable[[Any, str], Awaitable[None]]


@dataclass(slots=True)
class SweepReport:
    streams: int = 0
    events: int = 0
    # Streams whose own transaction failed this sweep (left whole, retried next time).
    failed: int = 0


async def count_sweepable(pool: asyncpg.Pool) -> SweepReport:
    with translated(_ACTION):
        row = await pool.fetchrow(_COUNT)
    assert row is not None
    return SweepReport(streams=int(row["streams"]), events=int(row["events"]))


async def sweep(
    pool: asyncpg.Pool,
    delete_run: DeleteRun,
    *,
    batch_streams: int = 100,
    batch_events: int = 10_000,
    max_streams: int | None = None,
    max_rate: float | None = None,
) -> SweepReport:
    """Delete the streams that are expired (or soft-deleted) and unread by forks.

    `max_streams` bounds one call (the rest waits for the next); `max_rate`
    (events per second) paces the transactions, since deleting is WAL and I/O
    the appends' commits share.
    """
    report = SweepReport()
    failed: list[str] = []
    pace = _Pace(max_rate)
    # After a batch fails, its streams are retried a transaction each.
    singles = 0
    while max_streams is None or report.streams < max_streams:
        room = 1 if singles else batch_streams
        if max_streams is not None:
            room = min(room, max_streams - report.streams)
        attempt: list[str] = []
        try:
            picked = await _delete_batch(
                pool, delete_run, room, batch_events, failed, report, attempt
            )
        except (ReplayError, asyncpg.PostgresError, OSError) as exc:
            if not attempt:
                raise  # the pick itself failed: the database, not a stream
            if len(attempt) > 1:
                log.warning("expiry sweep: a batch failed (%s); its streams one at a time", exc)
                singles = len(attempt)
                continue
            log.warning("expiry sweep: stream run %s not deleted (%s)", attempt[0], exc)
            failed.extend(attempt)
            report.failed += 1
            singles = max(0, singles - 1)
            continue
        singles = max(0, singles - 1)
        if not picked:
            return report
        await pace.after(report.events)
    return report


async def _delete_batch(
    pool: asyncpg.Pool,
    delete_run: DeleteRun,
    room: int,
    batch_events: int,
    failed: list[str],
    report: SweepReport,
    attempt: list[str],
) -> list[str]:
    """One transaction: pick up to `room` streams, delete those within the event budget.

    `attempt` gets the streams tried before any is deleted, so a caller whose
    call raised knows which the rolled-back transaction held.
    """
    with translated(_ACTION):
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_PICK, room, failed)
            chosen = _within(rows, batch_events)
            attempt.extend(run_id for run_id, _ in chosen)
            for run_id, _ in chosen:
                await delete_run(conn, run_id)
    report.streams += len(chosen)
    report.events += sum(events for _, events in chosen)
    return attempt


def _within(rows: list[asyncpg.Record], budget: int) -> list[tuple[str, int]]:
    """The first rows whose events fit `budget`; at least one (a big stream goes alone)."""
    chosen: list[tuple[str, int]] = []
    for row in rows:
        events = int(row["events"])
        if chosen and events > budget:
            break
        chosen.append((row["run_id"], events))
        budget -= events
    return chosen


class _Pace:
    """Sleeps so that the events deleted so far took at least `events / rate` seconds."""

    def __init__(self, rate: float | None) -> None:
        self.rate = rate if rate and rate > 0 else None
        self.started = time.monotonic()

    async def after(self, events: int) -> None:
        if self.rate is None:
            return
        ahead = events / self.rate - (time.monotonic() - self.started)
        if ahead > 0:
            await asyncio.sleep(ahead)
