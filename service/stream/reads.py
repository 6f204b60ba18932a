"""The stream's reads of the log: a page of events together with the run's state.

One statement reads both, so they come from one snapshot: every event up to
the `last_seq` it reports is visible in the same read (the append bumps
`last_seq` and inserts the events in one transaction), and `closed` with
`last_seq` tells the reader whether it has reached the end for good.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg

from service.errors import Unavailable
from service.stream.framing import Row

PAGE = """
SELECT r.last_seq, r.closed, e.seq, e.chunk
FROM (SELECT last_seq, closed_at IS NOT NULL AS closed FROM runs WHERE run_id = $1) AS r
LEFT JOIN LATERAL (
    SELECT seq, chunk FROM events
    WHERE run_id = $1 AND seq > $2 AND seq <= r.last_seq
    ORDER BY seq LIMIT $3
) AS e ON true
"""

STATES = """
SELECT run_id, last_seq, closed_at IS NOT NULL AS closed FROM runs WHERE run_id = ANY($1::text[])
"""


@dataclass(frozen=True, slots=True)
class RunState:
    last_seq: int
    closed: bool


@dataclass(frozen=True, slots=True)
class Page:
    state: RunState
    rows: list[Row]

    @property
    def complete(self) -> bool:
        """Nothing after this page will ever exist."""
        end = self.rows[-1][0] if self.rows else None
        return self.state.closed and (end is None or end >= self.state.last_seq)


_DRIVER_ERRORS = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


async def read_page(pool: asyncpg.Pool, run_id: str, after: int, limit: int) -> Page | None:
    """Events with seq > `after` (at most `limit`) and the run's state; None if no such run."""
    try:
        async with pool.acquire() as conn:
            records = await conn.fetch(PAGE, run_id, after, limit)
    except _DRIVER_ERRORS as exc:
        raise Unavailable(f"the event log cannot be read: {exc}") from exc
    if not records:
        return None
    first = records[0]
    state = RunState(first[0], first[1])
    if first[2] is None:
        return Page(state, [])
    return Page(state, [(r[2], r[3]) for r in records])


async def read_states(pool: asyncpg.Pool, run_ids: Sequence[str]) -> dict[str, RunState]:
    try:
        async with pool.acquire() as conn:
            records = await conn.fetch(STATES, list(run_ids))
    except _DRIVER_ERRORS as exc:
        raise Unavailable(f"the event log cannot be read: {exc}") from exc
    return {r[0]: RunState(r[1], r[2]) for r in records}
