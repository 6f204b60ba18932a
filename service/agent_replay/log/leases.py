"""Leases on hosted runs: which process drives a run, and until when.

A driver claims a run's lease, renews it while it drives, and the run is
closed (by the driver, or by whoever reaps it) when it ends. A lease that ran
out means its process died: any live process may take the lease over and
terminalize the run, so no reader waits forever. Claims are single UPDATEs
with the condition in the WHERE clause (`queries.sql`), so two processes
never both win. Reached through `LogStore`'s lease methods.
"""

from __future__ import annotations

import asyncpg

from agent_replay.log.citus import Sharded
from agent_replay.log.faults import translated
from agent_replay.log.sql import QUERIES

_CLAIM = QUERIES["claim_lease"]
_CLAIM_EXPIRED = QUERIES["claim_expired_lease"]
_RENEW = QUERIES["renew_lease"]
_RENEW_MANY = QUERIES["renew_leases"]
_EXPIRED = QUERIES["expired_leases"]
_ORPHANED = QUERIES["orphaned_leases"]
_TAKE_OVER = QUERIES["take_over_lease"]

_ACTION = "the run's lease cannot be kept"


async def claim(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Take a run's lease if it is free, already ours, or expired."""
    with translated(_ACTION):
        return await pool.fetchval(_CLAIM, run_id, owner, seconds) is not None


async def claim_expired(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Take over a run whose driver's lease ran out (its process died)."""
    with translated(_ACTION):
        return await pool.fetchval(_CLAIM_EXPIRED, run_id, owner, seconds) is not None


async def renew(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Extend our lease. False: the run was closed (e.g. cancelled) or taken over."""
    with translated(_ACTION):
        return await pool.fetchval(_RENEW, run_id, owner, seconds) is not None


async def renew_many(
    pool: asyncpg.Pool,
    run_ids: list[str],
    owner: str,
    seconds: float,
    *,
    sharded: Sharded | None = None,
) -> set[str]:
    """Extend our leases on `run_ids`; the ones still ours (the rest were closed or taken).

    One statement renews every run whose row is not locked this instant; the few
    that were (an append committing) are renewed one by one after it. On Citus
    (`sharded`) one statement a shard: Citus locks rows (`FOR UPDATE`) on one only.
    """
    with translated(_ACTION):
        parts = (
            [run_ids]
            if sharded is None
            else [list(part) for part in await sharded.split(pool, dict.fromkeys(run_ids))]
        )
        kept = set()
        for part in parts:
            kept |= {r["run_id"] for r in await pool.fetch(_RENEW_MANY, part, owner, seconds)}
    for run_id in run_ids:
        if run_id not in kept and await renew(pool, run_id, owner, seconds):
            kept.add(run_id)
    return kept


async def expired(pool: asyncpg.Pool, limit: int = 100) -> list[str]:
    with translated(_ACTION):
        return [r["run_id"] for r in await pool.fetch(_EXPIRED, limit)]


async def orphans(pool: asyncpg.Pool, instance: str, owner: str) -> list[str]:
    """Open runs leased by an earlier life of this instance (same prefix, other owner)."""
    with translated(_ACTION):
        return [r["run_id"] for r in await pool.fetch(_ORPHANED, instance + "/", owner)]


async def take_over(
    pool: asyncpg.Pool, run_id: str, owner: str, seconds: float, instance: str
) -> bool:
    with translated(_ACTION):
        row = await pool.fetchval(_TAKE_OVER, run_id, owner, seconds, instance + "/")
    return row is not None
