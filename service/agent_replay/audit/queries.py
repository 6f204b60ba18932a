"""Run listings: filtered, newest first, keyset-paginated (SQLAlchemy Core).

Every filter is a column of `runs` with an index behind it (thread, status,
agent, error code and time share `created_at`; tools use the GIN index on the
maintained `tool_names`), so a page costs the same with ten runs or ten million events.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Select, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from agent_replay.audit.filters import Cursor, RunFilter
from agent_replay.audit.summary import SUMMARY_COLUMNS, summary
from agent_replay.log.schema import runs


@dataclass(frozen=True, slots=True)
class RunsPage:
    runs: list[dict[str, Any]]
    next_cursor: str | None


def conditions(f: RunFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = []
    if f.thread_id is not None:
        where.append(runs.c.thread_id == f.thread_id)
    if len(f.statuses) == 1:
        where.append(runs.c.status == f.statuses[0])
    elif f.statuses:
        where.append(runs.c.status.in_(f.statuses))
    if f.created_after is not None:
        where.append(runs.c.created_at >= f.created_after)
    if f.created_before is not None:
        where.append(runs.c.created_at < f.created_before)
    if f.agent is not None:
        where.append(runs.c.agent == f.agent)
    if f.tool is not None:
        where.append(runs.c.tool_names.contains([f.tool]))
    if f.has_error is True:
        where.append(runs.c.error_message.is_not(None))
    elif f.has_error is False:
        where.append(runs.c.error_message.is_(None))
    if len(f.error_codes) == 1:
        where.append(runs.c.error_code == f.error_codes[0])
    elif f.error_codes:
        where.append(runs.c.error_code.in_(f.error_codes))
    return where


def page_query(f: RunFilter, limit: int, after: Cursor | None) -> Select[Any]:
    where = conditions(f)
    if after is not None:
        where.append(
            tuple_(runs.c.created_at, runs.c.run_id) < tuple_(after.created_at, after.run_id)
        )
    return (
        select(*SUMMARY_COLUMNS)
        .where(*where)
        .order_by(runs.c.created_at.desc(), runs.c.run_id.desc())
        # One more than asked: whether it exists says if there is a next page.
        .limit(limit + 1)
    )


async def list_runs(
    conn: AsyncConnection, f: RunFilter, *, limit: int = 50, cursor: str | None = None
) -> RunsPage:
    after = Cursor.decode(cursor) if cursor else None
    rows = (await conn.execute(page_query(f, limit, after))).mappings().all()
    page = rows[:limit]
    next_cursor = (
        Cursor(page[-1]["created_at"], page[-1]["run_id"]).encode() if len(rows) > limit else None
    )
    return RunsPage([summary(row) for row in page], next_cursor)
