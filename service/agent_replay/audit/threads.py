"""A thread's transcript: each run's new user turn(s), then its assistant messages.

Pure, over already-loaded data, so the audit transcript and chat hydration
share it. A run's user turn is not in its log (the log holds what the agent
emitted); it is in the run's recorded input, an AG-UI `RunAgentInput` whose
`messages` is the whole conversation so far: the user messages this run
added are the trailing ones, after the last non-user message.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agent_replay.errors import InvalidJson
from agent_replay.log.chunks import loads
from agent_replay.projector.jsvalues import parse_date


@dataclass(frozen=True, slots=True)
class ThreadRun:
    run_id: str
    input: str | None  # RunAgentInput JSON text, as stored in runs.input
    messages: Sequence[dict[str, Any]]  # the run's projected UIMessages


def _text_parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, Any]] = []
    if isinstance(content, list):
        for item in content:
            if not isinstance(item, dict) or item.get("type") != "text":
                continue  # images, binary: not text turns
            text = item.get("text", item.get("content"))
            if isinstance(text, str) and text:
                parts.append({"type": "text", "content": text})
    return parts


def _tanstack_created_at(message: dict[str, Any]) -> Any:
    """TanStack's wire messages carry their UI time in `metadata.tanstack.createdAt`."""
    metadata = message.get("metadata")
    tanstack = metadata.get("tanstack") if isinstance(metadata, dict) else None
    return tanstack.get("createdAt") if isinstance(tanstack, dict) else None


def user_turns(run_id: str, input_text: str | None) -> list[dict[str, Any]]:
    """The user messages a run added, as UIMessages; [] when its input has none."""
    if not input_text:
        return []
    try:
        value = loads(input_text)
    except InvalidJson:
        return []
    wire = value.get("messages") if isinstance(value, dict) else None
    if not isinstance(wire, list):
        return []
    start = len(wire)
    while start > 0 and isinstance(wire[start - 1], dict) and wire[start - 1].get("role") == "user":
        start -= 1
    turns: list[dict[str, Any]] = []
    for index in range(start, len(wire)):
        message = wire[index]
        ident = message.get("id")
        turn: dict[str, Any] = {
            "id": ident if isinstance(ident, str) and ident else f"{run_id}-user-{index}",
            "role": "user",
            "parts": _text_parts(message.get("content")),
        }
        created = parse_date(message.get("createdAt", _tanstack_created_at(message)))
        if created is not None:
            turn["createdAt"] = created
        turns.append(turn)
    return turns


def thread_turns(runs: Iterable[ThreadRun]) -> list[tuple[ThreadRun, dict[str, Any]]]:
    """Each message of the thread with the run it came from, in order."""
    out: list[tuple[ThreadRun, dict[str, Any]]] = []
    for run in runs:
        projected = {m.get("id") for m in run.messages}
        # A log that snapshots the conversation already holds the user turn.
        out.extend((run, t) for t in user_turns(run.run_id, run.input) if t["id"] not in projected)
        out.extend((run, m) for m in run.messages)
    return out


def assemble_thread(runs: Iterable[ThreadRun]) -> list[dict[str, Any]]:
    return [message for _, message in thread_turns(runs)]
