"""Who reads a hosted run, across processes: the `run_readers` rows.

Each process holds a row per run it has followers of (whose policy watches
readers), refreshes it while they stay and deletes it when the last one
leaves, recording then when the run's last reader left if no other process
has one. A row nobody refreshes is a dead process's: `absence` removes it and
takes its last heartbeat as the time its reader left. Reached through
`LogStore`'s reader methods.
"""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from agent_replay.log.faults import translated
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import Absence

_HEARTBEAT = QUERIES["readers_heartbeat"]
_LEFT = QUERIES["readers_left"]
_ABSENCE = QUERIES["reader_absence"]
_LEFT_CITUS = QUERIES["citus_readers_left"]
_NOTIFY_CITUS = QUERIES["citus_notify_readers"]
# Runs per NOTIFY payload, as `readers_left`'s.
_LINES_PER_NOTE = 40

_ACTION = "the run's readers cannot be counted"


async def heartbeat(pool: asyncpg.Pool, holder: str, run_ids: Sequence[str]) -> list[str]:
    """The holder reads `run_ids`: refresh its rows. Returns the runs that got one."""
    with translated(_ACTION):
        return [r["run_id"] for r in await pool.fetch(_HEARTBEAT, holder, list(run_ids))]


async def left(
    pool: asyncpg.Pool,
    holder: str,
    run_ids: Sequence[str],
    fresh_seconds: float,
    *,
    citus: bool = False,
) -> list[str]:
    """The holder's last follower of `run_ids` left. Returns the runs nobody reads now.
    `citus`: the notification is queued by a statement of its own on the coordinator,
    in the same transaction (agent_replay.log.citus)."""
    with translated(_ACTION):
        if not citus:
            rows = await pool.fetch(_LEFT, holder, list(run_ids), fresh_seconds)
            return [r["run_id"] for r in rows]
        async with pool.acquire() as conn, conn.transaction():
            rows = await conn.fetch(_LEFT_CITUS, holder, list(run_ids), fresh_seconds)
            unread = [r["run_id"] for r in rows]
            for i in range(0, len(unread), _LINES_PER_NOTE):
                await conn.execute(_NOTIFY_CITUS, "\n".join(unread[i : i + _LINES_PER_NOTE]))
        return unread


async def absence(pool: asyncpg.Pool, run_id: str, fresh_seconds: float) -> Absence | None:
    with translated(_ACTION):
        row = await pool.fetchrow(_ABSENCE, run_id, fresh_seconds)
    if row is None:
        return None
    return Absence(row["readers"], row["closed"], row["left_at"], row["absent_seconds"])
