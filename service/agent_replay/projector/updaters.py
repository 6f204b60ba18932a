"""Pure part updaters, named after TanStack's ``message-updaters.ts``.

Each function takes the part it replaces (or None when there is none) plus
the change, and returns the new part; none of them mutates anything. Where
the new part goes (replace in place or append) is decided by the caller,
``Message.put``, from the same lookup TanStack's updater performs.

A part is a dict of JSON values, except that streamed strings may be
``StrRef`` and a structured ``partial`` a ``LazyPartial`` (see buffers.py),
and ``UNDEF`` marks a key that is absent (rendering drops it).
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.buffers import LazyPartial, PartialTracker, StrBuf, StrRef
from agent_replay.projector.jsvalues import (
    UNDEF,
    coalesce,
    nullish,
    spread,
    stringify,
    to_string,
    truthy,
)

Part = dict[str, Any]


def update_text_part(content: StrRef | str) -> Part:
    """The text part written for a segment (replaces a trailing text part)."""
    return {"type": "text", "content": content}


def update_tool_call_part(existing: Part | None, call: Part) -> Part:
    """``updateToolCallPart``: new fields win; approval and output carry over;
    input and metadata carry over when the new value is null/absent."""
    old = existing if existing is not None else {}
    part: Part = {
        "type": "tool-call",
        "id": call["id"],
        "name": call.get("name", UNDEF),
        "arguments": call["arguments"],
        "state": call["state"],
    }
    approval = old.get("approval", UNDEF)
    if truthy(approval):
        part["approval"] = spread(approval)
    output = old.get("output", UNDEF)
    if output is not UNDEF:
        part["output"] = output
    part["input"] = coalesce(call.get("input", UNDEF), old.get("input", UNDEF))
    part["metadata"] = coalesce(call.get("metadata", UNDEF), old.get("metadata", UNDEF))
    return part


def update_tool_call_arguments(existing: Part, name: Any, arguments: StrRef, state: str) -> Part:
    """``updateToolCallPart`` as TOOL_CALL_ARGS calls it (no input, no metadata).

    The existing part was built by ``update_tool_call_part`` at the start of
    the call, so copying it and setting the draft's fields gives the same
    part; this is the hot path of a streamed argument.
    """
    return {**existing, "name": name, "arguments": arguments, "state": state}


def update_tool_result_part(tool_call_id: Any, content: Any, state: str, error: Any) -> Part:
    """``updateToolResultPart``: the tool-result part for a call."""
    part: Part = {
        "type": "tool-result",
        "toolCallId": tool_call_id,
        "content": content,
        "state": state,
    }
    if truthy(error):
        part["error"] = error
    return part


def update_tool_call_approval(existing: Part, approval_id: Any) -> Part:
    """``updateToolCallApproval``: the call waits for the user."""
    approval: Part = {"needsApproval": True}
    if approval_id is not UNDEF:
        approval["id"] = approval_id
    return {**existing, "state": "approval-requested", "approval": approval}


def update_tool_call_with_output(existing: Part, output: Any, state: str) -> Part:
    """``updateToolCallWithOutput`` as TOOL_CALL_RESULT calls it."""
    return {**existing, "output": output, "state": state}


def append_structured_output_delta(existing: Part | None, delta: str) -> Part:
    """``appendStructuredOutputDelta``: raw grows; partial is the latest good parse."""
    raw = existing.get("raw", UNDEF) if existing is not None else UNDEF
    tracker = _live_tracker(existing, raw)
    if tracker is None:
        seed = _raw_text(raw)
        fallback = existing.get("partial", UNDEF) if existing is not None else UNDEF
        if isinstance(fallback, LazyPartial):
            fallback = fallback.render()
        tracker = PartialTracker(StrBuf(seed), fallback)
    tracker.buf.append(delta)
    part: Part = {
        "type": "structured-output",
        "status": "streaming",
        "raw": tracker.buf.ref(),
        "partial": tracker.mark(),
    }
    if existing is not None:
        part["reasoning"] = existing.get("reasoning", UNDEF)
    return part


def _live_tracker(existing: Part | None, raw: Any) -> PartialTracker | None:
    """The tracker to extend when ``existing`` is the latest streamed part."""
    if existing is None or not isinstance(raw, StrRef):
        return None
    partial = existing.get("partial")
    if not isinstance(partial, LazyPartial):
        return None
    tracker = partial.tracker
    if (
        tracker.buf is raw.buf
        and raw.end == raw.buf.size
        and partial.index == len(tracker.ends) - 1
    ):
        return tracker
    return None


def _raw_text(raw: Any) -> str:
    # ``(existing?.raw ?? "") + delta``: a non-string raw is stringified.
    if isinstance(raw, StrRef):
        return raw.render()
    return "" if nullish(raw) else to_string(raw)


def complete_structured_output_part(
    existing: Part | None, data: Any, raw: Any, reasoning: Any
) -> Part:
    """``completeStructuredOutputPart``: raw is the given one, else the streamed
    one, else ``JSON.stringify(data)``."""
    existing_raw = existing.get("raw", UNDEF) if existing is not None else ""
    resolved = raw if truthy(raw) else existing_raw
    if isinstance(resolved, StrRef):
        resolved = resolved.render()
    if resolved == "" and data is not UNDEF:
        resolved = stringify(data)
    part: Part = {
        "type": "structured-output",
        "status": "complete",
        "data": data,
        "partial": data,
        "raw": resolved,
    }
    if reasoning is not UNDEF:
        part["reasoning"] = reasoning
    return part


def error_structured_output_part(existing: Part | None, error_message: Any) -> Part | None:
    """``errorStructuredOutputPart``; None when a complete part stays as it is."""
    if existing is None:
        return {
            "type": "structured-output",
            "status": "error",
            "raw": "",
            "errorMessage": error_message,
        }
    if existing.get("status") == "complete":
        return None
    return {**existing, "status": "error", "errorMessage": error_message}


def update_thinking_part(step_id: Any, content: StrRef | str, signature: Any) -> Part:
    """``updateThinkingPart``: one thinking part per step id."""
    part: Part = {"type": "thinking", "content": content, "stepId": step_id}
    if truthy(signature):
        part["signature"] = signature
    return part


def with_thought_signature(existing: Part, signature: str) -> Part:
    """A tool-call part with ``metadata.thoughtSignature`` (Gemini)."""
    metadata = existing.get("metadata", UNDEF)
    base = spread(metadata) if isinstance(metadata, (dict, list)) else {}
    return {**existing, "metadata": {**base, "thoughtSignature": signature}}
