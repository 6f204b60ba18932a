"""A run's summary: what a listing shows, from the run row alone."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, Text, cast

from agent_replay.log.chunks import loads
from agent_replay.log.schema import runs

# What both a summary and an export record say about a run.
RUN_COLUMNS: tuple[ColumnElement[Any], ...] = (
    runs.c.run_id,
    runs.c.thread_id,
    runs.c.agent,
    runs.c.status,
    runs.c.created_at,
    runs.c.updated_at,
    runs.c.closed_at,
    runs.c.last_seq,
    runs.c.error_message,
    runs.c.error_code,
    # jsonb as text, decoded by the log's exact parser like Run.from_record.
    cast(runs.c.metadata, Text).label("metadata"),
)

# Everything a summary needs, all maintained on the run row by appends.
SUMMARY_COLUMNS = (
    *RUN_COLUMNS,
    runs.c.tool_names,
    runs.c.prompt_tokens,
    runs.c.completion_tokens,
    runs.c.total_tokens,
)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def duration_ms(created_at: datetime, closed_at: datetime | None) -> int | None:
    if closed_at is None:
        return None
    return (closed_at - created_at) // timedelta(milliseconds=1)


def usage(row: Mapping[str, Any]) -> dict[str, int | None] | None:
    values = (row["prompt_tokens"], row["completion_tokens"], row["total_tokens"])
    if all(v is None for v in values):
        return None
    return dict(zip(("promptTokens", "completionTokens", "totalTokens"), values, strict=True))


def summary(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "run_id": row["run_id"],
        "thread_id": row["thread_id"],
        "agent": row["agent"],
        "status": row["status"],
        "created_at": _iso(row["created_at"]),
        "updated_at": _iso(row["updated_at"]),
        "closed_at": _iso(row["closed_at"]),
        "duration_ms": duration_ms(row["created_at"], row["closed_at"]),
        "event_count": row["last_seq"],
        "tool_names": list(row["tool_names"]),
        "error": row["error_message"],
        "error_code": row["error_code"],
        "usage": usage(row),
        "metadata": loads(row["metadata"]),
    }
