"""The thread hydration document TanStack's ChatClient reads on attach.

    {"messages": UIMessage[], "activeRun": {"runId"} | null, "interrupts": null,
     "page": {"truncated": bool, "cursor"?: str}}

While a run is active its assistant turn is left out (its user turn stays):
the client rebuilds that turn by joining the run from its first event, and
TanStack's client duplicates text when hydration already holds part of it.
An unknown thread hydrates to an empty document, still 200: the client
treats any other status as a failure it swallows into an empty thread.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from agent_replay.api.deps import AppState
from agent_replay.api.responses import JSON
from agent_replay.audit.cache import final_projections, thread_runs
from agent_replay.audit.projection import parse_messages
from agent_replay.audit.threads import ThreadRun, assemble_thread
from agent_replay.errors import InvalidRequest
from agent_replay.ingest import whole_number


def _page(
    messages: list[dict[str, Any]], limit: int | None, before: str | None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The newest `limit` messages before the cursor (an index into the transcript)."""
    end = len(messages)
    if before is not None:
        cursor = whole_number(before)
        if cursor is None or cursor > len(messages):
            raise InvalidRequest(f"before={before!r} is not a cursor this thread gave out")
        end = cursor
    start = 0 if limit is None else max(0, end - limit)
    page: dict[str, Any] = {"truncated": start > 0}
    if start > 0:
        page["cursor"] = str(start)
    return messages[start:end], page


async def hydrate(
    state: AppState,
    agent: str,
    thread_id: str,
    *,
    limit: int | None,
    before: str | None,
    hosted_only: bool = False,
) -> Response:
    """`hosted_only`: the thread as a `run` key may see it, its hosted runs alone."""
    stored = await thread_runs(state.log, thread_id, hosted_only=hosted_only)
    closed = [run for run in stored if run.closed]
    texts = await final_projections(state.log, closed, False) if closed else {}
    messages = assemble_thread(
        ThreadRun(run.run_id, run.input, parse_messages(texts[run.run_id]) if run.closed else [])
        for run in stored
    )
    active = next((run.run_id for run in reversed(stored) if not run.closed), None)
    page_messages, page = _page(messages, limit, before)
    return JSON(
        {
            "messages": page_messages,
            "activeRun": {"runId": active} if active else None,
            "interrupts": None,
            "page": page,
        }
    )
