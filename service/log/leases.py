"""Leases on hosted runs: which process drives a run, and until when.

A driver claims a run's lease, renews it while it drives, and the run is
closed (by the driver, or by whoever reaps it) when it ends. A lease that ran
out means its process died: any live process may take the lease over and
terminalize the run, so no reader waits forever. Claims are single UPDATEs
with the condition in the WHERE clause, so two processes never both win.
"""

from __future__ import annotations

import asyncpg

_CLAIM = """
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL
  AND (lease_owner IS NULL OR lease_owner = $2 OR lease_expires_at < now())
RETURNING run_id
"""

_CLAIM_EXPIRED = """
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL AND lease_expires_at < now()
RETURNING run_id
"""

_RENEW = """
UPDATE runs SET lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND lease_owner = $2 AND closed_at IS NULL
RETURNING run_id
"""

_EXPIRED = """
SELECT run_id FROM runs
WHERE closed_at IS NULL AND lease_owner IS NOT NULL AND lease_expires_at < now()
ORDER BY lease_expires_at LIMIT $1
"""

_OWNED_BY_PREFIX = """
SELECT run_id FROM runs
WHERE closed_at IS NULL AND lease_owner LIKE $1 || '%' AND lease_owner <> $2
"""

_TAKE_OVER = """
UPDATE runs SET lease_owner = $2, lease_expires_at = now() + make_interval(secs => $3)
WHERE run_id = $1 AND closed_at IS NULL AND lease_owner LIKE $4 || '%'
RETURNING run_id
"""


async def claim(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Take a run's lease if it is free, already ours, or expired."""
    return await pool.fetchval(_CLAIM, run_id, owner, seconds) is not None


async def claim_expired(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Take over a run whose driver's lease ran out (its process died)."""
    return await pool.fetchval(_CLAIM_EXPIRED, run_id, owner, seconds) is not None


async def renew(pool: asyncpg.Pool, run_id: str, owner: str, seconds: float) -> bool:
    """Extend our lease. False: the run was closed (e.g. cancelled) or taken over."""
    return await pool.fetchval(_RENEW, run_id, owner, seconds) is not None


async def expired(pool: asyncpg.Pool, limit: int = 100) -> list[str]:
    return [r["run_id"] for r in await pool.fetch(_EXPIRED, limit)]


async def orphans(pool: asyncpg.Pool, instance: str, owner: str) -> list[str]:
    """Open runs leased by an earlier life of this instance (same prefix, other owner)."""
    return [r["run_id"] for r in await pool.fetch(_OWNED_BY_PREFIX, instance + "/", owner)]


async def take_over(
    pool: asyncpg.Pool, run_id: str, owner: str, seconds: float, instance: str
) -> bool:
    return await pool.fetchval(_TAKE_OVER, run_id, owner, seconds, instance + "/") is not None
