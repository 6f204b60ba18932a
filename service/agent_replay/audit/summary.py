"""A run's summary: what a listing shows, from the run row alone."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from agent_replay.log import Run


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def duration_ms(created_at: datetime, closed_at: datetime | None) -> int | None:
    if closed_at is None:
        return None
    return (closed_at - created_at) // timedelta(milliseconds=1)


def usage(run: Run) -> dict[str, int | None] | None:
    values = (run.prompt_tokens, run.completion_tokens, run.total_tokens)
    if all(v is None for v in values):
        return None
    return dict(zip(("promptTokens", "completionTokens", "totalTokens"), values, strict=True))


def summary(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent": run.agent,
        "status": run.status,
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "closed_at": _iso(run.closed_at),
        "duration_ms": duration_ms(run.created_at, run.closed_at),
        "event_count": run.last_seq,
        "tool_names": list(run.tool_names),
        "error": run.error_message,
        "error_code": run.error_code,
        "usage": usage(run),
        "metadata": run.metadata,
        # Matches replaced per redaction rule (never the text).
        "redactions": dict(run.redactions or {}),
    }
