"""A transcript: the runs, and every turn in order with the time it happened.

Turn times come from the log: an assistant message's time is when the
first event naming it was received, a tool call's when its start was; a
user turn takes its `createdAt` or its run's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from agent_replay.archive.reader import Archive
from agent_replay.audit.projection import project_run
from agent_replay.audit.threads import ThreadRun, thread_turns
from agent_replay.log.values import RunRecord


@dataclass(frozen=True, slots=True)
class Turn:
    run_id: str
    time: datetime | None
    message: dict[str, Any] | None = None  # a UIMessage
    error: str | None = None  # or: the run ended in this error
    error_code: str | None = None  # with this code (`abandoned`, `cancelled`, ...)


@dataclass(frozen=True, slots=True)
class Transcript:
    title: str
    runs: list[RunRecord]
    turns: list[Turn]
    # toolCallId -> when the call started / its result arrived.
    call_times: dict[str, datetime] = field(default_factory=dict)
    result_times: dict[str, datetime] = field(default_factory=dict)


def _title(runs: list[RunRecord], thread_id: str | None) -> str:
    if thread_id is not None:  # asked for a thread: titled by it, however many runs it has
        return f"Thread {thread_id}"
    if len(runs) == 1:
        return f"Run {runs[0].run_id}"
    return f"Thread {runs[0].thread_id}"


def _created(message: dict[str, Any]) -> datetime | None:
    value = message.get("createdAt")
    try:
        return datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None  # a JS date past year 9999


def from_archive(
    archive: Archive, *, normalize: bool = False, thread_id: str | None = None
) -> Transcript:
    first_seen: dict[str, datetime] = {}
    call_times: dict[str, datetime] = {}
    result_times: dict[str, datetime] = {}
    thread: list[ThreadRun] = []
    for run in archive.runs:
        for event in run.events:
            chunk = event.chunk
            if chunk.message_id is not None:
                first_seen.setdefault(chunk.message_id, event.received_at)
            if chunk.tool_call_id is not None:
                times = result_times if chunk.type == "TOOL_CALL_RESULT" else call_times
                times.setdefault(chunk.tool_call_id, event.received_at)
        messages = project_run(
            run.record.run_id,
            (e.chunk.text for e in run.events),
            normalize=normalize,
            finalize=run.record.closed_at is not None,
        )
        thread.append(ThreadRun(run.record.run_id, run.record.input, messages))
    by_run: dict[str, list[dict[str, Any]]] = {}
    for source, message in thread_turns(thread):
        by_run.setdefault(source.run_id, []).append(message)
    turns: list[Turn] = []
    for record in archive.records:
        for message in by_run.get(record.run_id, []):
            ident = message.get("id")
            time = first_seen.get(ident) if isinstance(ident, str) else None
            turns.append(
                Turn(record.run_id, time or _created(message) or record.created_at, message)
            )
        if record.error_message:
            turns.append(
                Turn(
                    record.run_id,
                    record.closed_at,
                    error=record.error_message,
                    error_code=record.error_code,
                )
            )
    title = _title(archive.records, thread_id)
    return Transcript(title, archive.records, turns, call_times, result_times)
