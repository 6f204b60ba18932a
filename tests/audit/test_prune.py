"""agent-replay prune: closed runs older than a date go (events, cached projections, rows) in
small batches; open and newer runs stay; --dry-run only counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from agent_replay.archive.commands import log_for
from agent_replay.audit.cache import StoredRun, final_projections
from agent_replay.log import EventLog
from tests.audit.helpers import fingerprint, replay

CUTOFF = datetime(2026, 1, 1, tzinfo=UTC)
# run id -> (events, closed_at or None for open)
RUNS: dict[str, tuple[int, datetime | None]] = {
    "old-small-1": (3, CUTOFF - timedelta(days=30)),
    "old-small-2": (5, CUTOFF - timedelta(days=2)),
    "old-big": (40, CUTOFF - timedelta(days=9)),  # more than one batch of events
    "old-edge": (2, CUTOFF - timedelta(microseconds=1)),
    "at-cutoff": (4, CUTOFF),  # not before the date: stays
    "recent": (6, CUTOFF + timedelta(days=1)),
    "old-open": (7, None),  # never closed: stays, however old
}
OLD = sorted(r for r, (_, closed) in RUNS.items() if closed is not None and closed < CUTOFF)


@pytest.fixture(scope="module")
async def populated(database_url: str) -> None:
    log = await EventLog.open(database_url)
    try:
        for run_id, (count, closed) in RUNS.items():
            await log.append(
                run_id, [{"type": "E", "n": i} for i in range(count)], close=closed is not None
            )
    finally:
        await log.close()
    conn = await asyncpg.connect(database_url)
    try:
        await conn.executemany(
            "UPDATE runs SET closed_at = $2, created_at = $2::timestamptz - interval '1 hour'"
            " WHERE run_id = $1",
            [(r, c) for r, (_, c) in RUNS.items() if c is not None],
        )
        await conn.execute("UPDATE runs SET created_at = '2020-01-01' WHERE run_id = 'old-open'")
    finally:
        await conn.close()
    closed = [StoredRun(r, n, True) for r, (n, c) in RUNS.items() if c is not None]
    async with log_for(database_url) as log:
        await final_projections(log, closed, False)


async def _rows(url: str) -> dict[str, list[str]]:
    conn = await asyncpg.connect(url)
    try:
        return {
            table: [
                r[0] for r in await conn.fetch(f"SELECT DISTINCT run_id FROM {table} ORDER BY 1")
            ]
            for table in ("runs", "events", "run_projections")
        }
    finally:
        await conn.close()


async def test_prune_when_dry_run_then_counts_and_changes_nothing(
    populated: None, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = await fingerprint(database_url)
    status, out, err = await replay(
        capsys,
        "prune",
        "--closed-before",
        "2026-01-01",
        "--dry-run",
        "--database-url",
        database_url,
    )
    assert status == 0, err
    events = sum(RUNS[r][0] for r in OLD)
    assert f"would delete {len(OLD)} runs and {events} events closed before 2026-01-01" in out
    assert await fingerprint(database_url) == before


async def test_prune_when_closed_before_date_then_only_those_runs_deleted_in_batches(
    populated: None, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = await replay(
        capsys, "prune", "--closed-before", "2026-01-01T00:00:00Z",
        "--batch-events", "7", "--database-url", database_url,
    )  # fmt: skip
    assert status == 0, err
    events = sum(RUNS[r][0] for r in OLD)
    assert f"deleted {len(OLD)} runs and {events} events" in out
    kept = sorted(set(RUNS) - set(OLD))
    rows = await _rows(database_url)
    assert rows["runs"] == kept and rows["events"] == kept
    assert rows["run_projections"] == sorted(r for r in kept if RUNS[r][1] is not None)
    status, out, _ = await replay(
        capsys, "prune", "--closed-before", "2026-01-01", "--database-url", database_url
    )
    assert status == 0 and "deleted 0 runs and 0 events" in out


async def test_prune_when_date_unreadable_then_usage_error(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        await replay(
            capsys, "prune", "--closed-before", "last tuesday", "--database-url", database_url
        )
    assert exit_info.value.code == 2
