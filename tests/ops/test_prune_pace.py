"""agent-replay prune --max-rate: retention paced to spare the appends' I/O, and still complete."""

from __future__ import annotations

import time

import asyncpg
import pytest

from agent_replay.log import EventLog
from tests.audit.helpers import replay


async def test_prune_when_max_rate_set_then_paced_to_it_and_everything_old_goes(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    log = await EventLog.open(database_url)
    try:
        for i in range(30):
            await log.append(f"paced-{i}", [{"type": "E", "n": n} for n in range(20)], close=True)
        await log.append("paced-open", [{"type": "E"}])
    finally:
        await log.close()
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE runs SET closed_at = '2025-06-01'"
            " WHERE run_id LIKE 'paced-%' AND closed_at IS NOT NULL"
        )
    finally:
        await conn.close()
    started = time.monotonic()
    status, out, err = await replay(
        capsys, "prune", "--closed-before", "2026-01-01", "--max-rate", "300",
        "--batch-events", "100", "--database-url", database_url,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert status == 0, err
    assert "deleted 30 runs and 600 events" in out
    # 600 events at 300 a second: two seconds at least (load can only make it slower).
    assert elapsed >= 2.0
    conn = await asyncpg.connect(database_url)
    try:
        left = [r[0] for r in await conn.fetch("SELECT DISTINCT run_id FROM events")]
    finally:
        await conn.close()
    assert left == ["paced-open"]
