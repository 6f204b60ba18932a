"""Run listings: filtered, newest first, keyset-paginated.

The log answers the query (`AuditReads.list_runs`: every filter a column of `runs`
with an index behind it, so a page costs the same with ten runs or ten million
events); this module pages it and shapes each run's summary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_replay.audit.filters import Cursor
from agent_replay.audit.summary import summary
from agent_replay.log import AuditReads
from agent_replay.log.filters import RunFilter


@dataclass(frozen=True, slots=True)
class RunsPage:
    runs: list[dict[str, Any]]
    next_cursor: str | None


async def list_runs(
    log: AuditReads, f: RunFilter, *, limit: int = 50, cursor: str | None = None
) -> RunsPage:
    after = Cursor.decode(cursor) if cursor else None
    # One more than asked: whether it exists says if there is a next page.
    found = await log.list_runs(
        f, limit + 1, None if after is None else (after.created_at, after.run_id)
    )
    page = found[:limit]
    next_cursor = (
        Cursor(page[-1].created_at, page[-1].run_id).encode() if len(found) > limit else None
    )
    return RunsPage([summary(run) for run in page], next_cursor)
