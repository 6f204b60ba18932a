"""``MESSAGES_SNAPSHOT`` (spec §9b): reset, convert, fold reasoning fan-outs,
reconcile with the pre-snapshot list, replace the list. After
``handleMessagesSnapshotEvent``, ``mergeReasoningFanOut``,
``reconcileSnapshotToolCalls`` and ``enrichSnapshotToolCallsFromResults``.
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.jsvalues import UNDEF, JSONParseError, get, key_of, parse_json, truthy
from agent_replay.projector.model import Message
from agent_replay.projector.processor import StreamState
from agent_replay.projector.snapshot_convert import Abort, Msg, convert
from agent_replay.projector.tool_handlers import tool_result_error

Chunk = dict[str, Any]


def on_messages_snapshot(st: StreamState, chunk: Chunk) -> None:
    st.reset()
    wire = chunk.get("messages")
    if not isinstance(wire, list):
        return
    try:
        converted = [convert(message, st) for message in wire]
    except Abort:
        return
    previous = [{**m.fields, "parts": m.plain_parts()} for m in st.messages]
    prev_by_id = {key_of(m.get("id", UNDEF)): m for m in previous}  # the last one wins, as in a Map
    result = []
    for msg in _reconcile(fold_reasoning(converted), previous):
        if msg.get("metadata") is None:
            prev = prev_by_id.get(key_of(msg.get("id", UNDEF)))
            if prev is not None and prev.get("metadata") is not None:
                msg = {**msg, "metadata": prev["metadata"]}
        fields = {k: v for k, v in msg.items() if k != "parts"}
        result.append(Message(fields, list(msg["parts"])))
    st.set_messages(result)


def _kind(part: Any) -> Any:
    return get(part, "type")


def _thinking_only(msg: Msg) -> bool:
    parts = msg["parts"]
    return (
        msg.get("role") == "assistant"
        and bool(parts)
        and all(_kind(p) == "thinking" for p in parts)
    )


def _result_only(msg: Msg) -> bool:
    parts = msg["parts"]
    return (
        msg.get("role") == "assistant"
        and any(_kind(p) == "tool-result" for p in parts)
        and all(_kind(p) in ("tool-result", "ui-resource") for p in parts)
    )


def fold_reasoning(messages: list[Msg]) -> list[Msg]:
    """Thinking-only messages (reasoning fan-outs) join the next assistant
    message that is not a lone tool result."""
    out: list[Msg] = []
    held: list[Msg] = []
    for msg in messages:
        if _thinking_only(msg):
            held.append(msg)
        elif msg.get("role") == "assistant" and held and not _result_only(msg):
            thinking = [p for h in held for p in h["parts"] if _kind(p) == "thinking"]
            out.append({**msg, "parts": thinking + msg["parts"]})
            held = []
        else:
            out.extend(held)
            held = []
            out.append(msg)
    out.extend(held)
    return out


def _holds_call(msg: Msg, key: Any) -> bool:
    return any(_kind(p) == "tool-call" and key_of(p.get("id", UNDEF)) == key for p in msg["parts"])


def _reconcile(snapshot: list[Msg], previous: list[Msg]) -> list[Msg]:
    """Move lone tool results into the message of their call (or the latest
    assistant message), then enrich tool calls from results."""
    prev_calls: dict[Any, Msg] = {}
    for msg in previous:
        for part in msg["parts"]:
            if _kind(part) == "tool-call":
                prev_calls[key_of(part.get("id", UNDEF))] = part
    snapshot_calls = {
        key_of(p.get("id", UNDEF))
        for msg in snapshot
        for p in msg["parts"]
        if _kind(p) == "tool-call"
    }
    reconciled: list[Msg] = []
    for msg in snapshot:
        results = [p for p in msg["parts"] if _kind(p) == "tool-result"]
        lone = (
            msg.get("role") == "assistant"
            and len(results) == 1
            and all(_kind(p) in ("tool-result", "ui-resource") for p in msg["parts"])
        )
        if not lone:
            reconciled.append(msg)
            continue
        key = key_of(results[0].get("toolCallId", UNDEF))
        target = next((m for m in reversed(reconciled) if _holds_call(m, key)), None)
        if target is None:
            target = next(
                (
                    m
                    for m in reversed(reconciled)
                    if m.get("role") == "assistant"
                    and not (len(m["parts"]) == 1 and _kind(m["parts"][0]) == "tool-result")
                ),
                None,
            )
        if target is None:
            reconciled.append(msg)
            continue
        parts = list(target["parts"])
        if key not in snapshot_calls and not _holds_call(target, key) and key in prev_calls:
            parts.append(dict(prev_calls[key]))
            snapshot_calls.add(key)
        parts.extend(msg["parts"])
        target["parts"] = parts
    return _enrich(reconciled, prev_calls)


def _enrich(messages: list[Msg], prev_calls: dict[Any, Msg]) -> list[Msg]:
    """Tool calls take over a richer pre-snapshot state, then their result."""
    results = {
        key_of(p.get("toolCallId", UNDEF)): p
        for msg in messages
        for p in msg["parts"]
        if _kind(p) == "tool-result"
    }
    out = []
    for msg in messages:
        parts = [
            _enrich_call(p, prev_calls, results) if _kind(p) == "tool-call" else p
            for p in msg["parts"]
        ]
        changed = any(new is not old for new, old in zip(parts, msg["parts"], strict=True))
        out.append({**msg, "parts": parts} if changed else msg)
    return out


def _enrich_call(part: Msg, prev_calls: dict[Any, Msg], results: dict[Any, Msg]) -> Msg:
    key = key_of(part.get("id", UNDEF))
    prev = prev_calls.get(key)
    result = results.get(key)
    poorer = part.get("output", UNDEF) is UNDEF or part.get("state") in (
        "input-complete",
        "input-streaming",
        "awaiting-input",
    )
    richer = prev is not None and (
        prev.get("output", UNDEF) is not UNDEF or prev.get("state") in ("complete", "error")
    )
    new = part
    if prev is not None and richer and poorer:
        new = {**part, "state": prev.get("state", UNDEF)}
        for field in ("output", "approval", "metadata"):
            if prev.get(field, UNDEF) is not UNDEF:
                new[field] = prev[field]
    if result is not None and new.get("output", UNDEF) is UNDEF:
        content = result.get("content", UNDEF)
        output: Any
        if isinstance(content, list):
            output = content
        else:
            try:
                output = parse_json(content)
            except JSONParseError:
                output = content
        failed = result.get("state") == "error"
        error = tool_result_error(output) if failed else UNDEF
        new = {
            **new,
            "output": {"error": error} if truthy(error) else output,
            "state": "error" if failed else "complete",
        }
    return new
