"""Event handlers and the dispatch on ``chunk["type"]``.

One function per AG-UI event the reference handles, named after
``StreamProcessor.handle*Event``; tool-call events live in tool_handlers.py
and ``MESSAGES_SNAPSHOT`` in snapshot.py. ``HANDLERS`` has exactly the types
the catalog (``agent_replay.event_types``) gives ``Reader.PROJECTOR``; the
others (``*_CHUNK``, ``THINKING_*``, ``STATE_*``, ``REASONING_START``…) are ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_replay.projector.draft import MessageDraft
from agent_replay.projector.jsvalues import (
    UNDEF,
    coalesce,
    get,
    key_of,
    or_empty,
    parse_date,
    same,
    spread,
    tanstack_bag,
    truthy,
)
from agent_replay.projector.processor import StreamState
from agent_replay.projector.snapshot import on_messages_snapshot
from agent_replay.projector.tool_handlers import (
    attach_tool_call_signature,
    on_approval_requested,
    on_interrupts,
    on_tool_call_args,
    on_tool_call_end,
    on_tool_call_result,
    on_tool_call_start,
)
from agent_replay.projector.updaters import (
    append_structured_output_delta,
    complete_structured_output_part,
)

Chunk = dict[str, Any]

# --- text (§6) -----------------------------------------------------------------


def merge_message_metadata(st: StreamState, ident: Any, incoming: Any) -> None:
    """``mergeMessageMetadata`` (§6.4)."""
    if not isinstance(incoming, dict):
        return
    message = st.message(ident)
    if message is None:
        return
    bag = tanstack_bag(incoming)
    to_merge = incoming
    if bag is not None and ("content" in bag or "args" in bag):
        # Per-delta leftovers never stamp onto the message.
        trimmed = {k: v for k, v in bag.items() if k not in ("content", "args")}
        to_merge = {**incoming, "tanstack": trimmed}
    current = message.fields.get("metadata", UNDEF)
    if current is None or current is UNDEF:
        merged = dict(to_merge)
    else:
        merged = {**spread(current), **to_merge}
        old_bag, new_bag = get(current, "tanstack"), to_merge.get("tanstack")
        if isinstance(old_bag, dict) and isinstance(new_bag, dict):
            merged["tanstack"] = {**old_bag, **new_bag}
    created = parse_date(get(bag, "createdAt"))
    for target in st.each(ident):
        target.set_field("metadata", merged)
        if created is not None:
            target.set_field("createdAt", created)


def _new_segment(st: StreamState, ident: Any, draft: MessageDraft) -> None:
    """A tool call started since the segment began: later text starts a new one."""
    if draft.text_pending():
        st.flush_text(ident, draft)
    draft.reset_segment()
    draft.tool_since_text = False


def on_text_message_start(st: StreamState, chunk: Chunk) -> None:
    ident = chunk.get("messageId", UNDEF)
    role = chunk.get("role", UNDEF)
    ui_role = role if role in ("user", "system") else "assistant"
    pending = st.pending_rename
    if truthy(pending):
        st.pending_rename = None
        if not same(pending, ident):
            _rename(st, pending, ident)
        draft = st.draft(ident)
        if draft is None:
            st.create_draft(ident, ui_role)
            st.activate(ident)
        elif draft.tool_since_text:
            _new_segment(st, ident, draft)
        merge_message_metadata(st, ident, chunk.get("metadata", UNDEF))
        return
    if st.message(ident) is not None:
        st.activate(ident)
        draft = st.draft(ident)
        if draft is None:
            # Unlike resolve(), not seeded: the first delta replaces the last text part.
            st.create_draft(ident, ui_role)
        elif draft.tool_since_text:
            _new_segment(st, ident, draft)
        merge_message_metadata(st, ident, chunk.get("metadata", UNDEF))
        return
    st.new_message(ident, ui_role)
    st.create_draft(ident, ui_role)
    st.activate(ident)
    merge_message_metadata(st, ident, chunk.get("metadata", UNDEF))


def _rename(st: StreamState, old: Any, new: Any) -> None:
    """The message the projector created itself takes the id the producer chose.
    The structured set is not updated (reference behaviour)."""
    st.rename_messages(old, new)
    draft = st.drafts.pop(key_of(old), None)
    if draft is not None:
        draft.id = new
        st.drafts[key_of(new)] = draft
    st.active.pop(key_of(old), None)
    st.activate(new)
    for call_key, owner in st.tool_index.items():
        if same(owner, old):
            st.tool_index[call_key] = new


def on_text_message_content(st: StreamState, chunk: Chunk) -> None:
    ident, draft = st.resolve(chunk.get("messageId", UNDEF))
    metadata = chunk.get("metadata", UNDEF)
    if metadata is not UNDEF:
        merge_message_metadata(st, ident, metadata)
    delta = chunk.get("delta", UNDEF)
    delta = delta if type(delta) is str else or_empty(delta)
    if st.structured and key_of(ident) in st.structured:
        if delta:
            for message in st.each(ident):
                position = message.find("structured-output")
                message.put(
                    position, append_structured_output_delta(message.part_at(position), delta)
                )
        return
    if draft.tool_since_text and draft.segment.size > 0:
        _new_segment(st, ident, draft)
    draft.tool_since_text = False
    draft.segment.append(delta)
    if draft.text_pending():
        st.flush_text(ident, draft)


def on_text_message_end(st: StreamState, chunk: Chunk) -> None:
    ident = chunk.get("messageId", UNDEF)
    merge_message_metadata(st, ident, chunk.get("metadata", UNDEF))
    draft = st.draft(ident)
    if draft is not None and not draft.complete and draft.text_pending():
        st.flush_text(ident, draft)


# --- runs (§5) -----------------------------------------------------------------


def on_run_started(st: StreamState, chunk: Chunk) -> None:
    run_id = chunk.get("runId", UNDEF)
    st.runs.setdefault(key_of(run_id), run_id)


def on_run_finished(st: StreamState, chunk: Chunk) -> None:
    reason = chunk.get("finishReason", UNDEF)
    st.finish_reason = (
        reason if reason is not UNDEF else coalesce(get(tanstack_bag(chunk), "finishReason"), None)
    )
    st.runs.pop(key_of(chunk.get("runId", UNDEF)), None)
    interrupted = get(chunk.get("outcome"), "type") == "interrupt"
    if interrupted and not on_interrupts(st, get(chunk["outcome"], "interrupts")):
        return
    if st.runs:
        return
    for ident in list(st.active.values()):
        st.complete_calls(ident)
    if st.finish_reason == "tool_calls" and not interrupted:
        return  # the agent loop continues: calls complete, the stream does not end
    st.done = True
    st.finalize()


def _run_id(chunk: Chunk) -> Any:
    for value in (chunk.get("runId"), get(tanstack_bag(chunk), "runId")):
        if isinstance(value, str) and value:
            return value
    return None


def on_run_error(st: StreamState, chunk: Chunk) -> None:
    st.has_error = True
    run_id = _run_id(chunk)
    if run_id is not None:
        st.runs.pop(run_id, None)
    else:
        st.runs.clear()
    ident, _ = st.resolve()
    message = chunk.get("message", UNDEF)
    if key_of(ident) in st.structured:
        st.error_structured(ident, message if truthy(message) else "An error occurred")
        del st.structured[key_of(ident)]


# --- thinking (§9) -------------------------------------------------------------


def on_step_started(st: StreamState, chunk: Chunk) -> None:
    name = chunk.get("stepName", UNDEF)
    step_id = name if truthy(name) else st.generate_id()
    active = st.recent()
    draft = st.draft(active) if truthy(active) else None
    if draft is None:
        st.pending_step = step_id  # no message yet: the next reasoning claims it
        return
    draft.current_step = step_id
    draft.step(key_of(step_id), step_id)
    st.pending_step = None


def _on_active(st: StreamState) -> tuple[Any, MessageDraft]:
    return st.resolve(coalesce(st.recent(), UNDEF))


def on_reasoning_message_content(st: StreamState, chunk: Chunk) -> None:
    ident, draft = _on_active(st)
    delta = chunk.get("delta", UNDEF)
    if truthy(st.pending_step):
        draft.current_step = st.pending_step
        draft.step(key_of(st.pending_step), st.pending_step)
        st.pending_step = None
    step_id = coalesce(draft.current_step, chunk.get("messageId", UNDEF))
    key = key_of(step_id)
    if key not in draft.steps:
        draft.current_step = step_id
    step = draft.step(key, step_id)
    step.text.append(delta if type(delta) is str else or_empty(delta))
    st.put_thinking(ident, step, draft.signatures.get(key, UNDEF))


def on_step_finished(st: StreamState, chunk: Chunk) -> None:
    # Thinking text on STEP_FINISHED is ignored; only a signature is taken.
    signature = chunk.get("signature", UNDEF)
    if not truthy(signature):
        return
    ident, draft = _on_active(st)
    step_id = coalesce(draft.current_step, chunk.get("stepId", UNDEF))
    if not truthy(step_id):
        return
    step = draft.steps.get(key_of(step_id))
    if step is None:
        return
    draft.signatures[key_of(step_id)] = signature
    st.put_thinking(ident, step, signature)


def on_reasoning_encrypted_value(st: StreamState, chunk: Chunk) -> None:
    value = chunk.get("encryptedValue")
    if not isinstance(value, str) or not value:
        return
    if chunk.get("subtype") == "tool-call":
        attach_tool_call_signature(st, chunk.get("entityId", UNDEF), value)
        return
    ident, draft = _on_active(st)
    step_id = coalesce(draft.current_step, chunk.get("entityId", UNDEF))
    key = key_of(step_id)
    draft.signatures[key] = value
    st.put_thinking(ident, draft.step(key, step_id), value)


# --- CUSTOM (§7 approval, §8 structured output, §9c) ----------------------------


def on_custom(st: StreamState, chunk: Chunk) -> None:
    name = chunk.get("name", UNDEF)
    value = chunk.get("value", UNDEF)
    if not truthy(value) or not isinstance(name, str):
        return
    active = st.recent()
    if name == "structured-output.start":
        ident, _ = st.resolve(coalesce(get(value, "messageId"), active, UNDEF))
        if truthy(ident):
            st.structured.setdefault(key_of(ident), ident)
    elif name == "structured-output.complete":
        ident, _ = st.resolve(coalesce(get(value, "messageId"), active, UNDEF))
        if truthy(ident):
            raw = coalesce(get(value, "raw"), "")
            for message in st.each(ident):
                position = message.find("structured-output")
                part = complete_structured_output_part(
                    message.part_at(position), get(value, "object"), raw, get(value, "reasoning")
                )
                message.put(position, part)
            st.structured.pop(key_of(ident), None)
    elif name == "approval-requested":
        on_approval_requested(st, value, active)
    elif name == "ui-resource":
        call_id = get(value, "toolCallId")
        target = coalesce(st.tool_index.get(key_of(call_id), UNDEF), active)
        if truthy(target):
            part = {
                "type": "ui-resource",
                "resource": get(value, "resource"),
                "toolCallId": call_id,
                "toolName": get(value, "toolName"),
                "serverId": get(value, "serverId"),
                "meta": get(value, "meta"),
            }
            for message in st.each(target):
                message.put(-1, part)


HANDLERS: dict[str, Callable[[StreamState, Chunk], None]] = {
    "TEXT_MESSAGE_START": on_text_message_start,
    "TEXT_MESSAGE_CONTENT": on_text_message_content,
    "TEXT_MESSAGE_END": on_text_message_end,
    "TOOL_CALL_START": on_tool_call_start,
    "TOOL_CALL_ARGS": on_tool_call_args,
    "TOOL_CALL_END": on_tool_call_end,
    "TOOL_CALL_RESULT": on_tool_call_result,
    "RUN_STARTED": on_run_started,
    "RUN_FINISHED": on_run_finished,
    "RUN_ERROR": on_run_error,
    "STEP_STARTED": on_step_started,
    "STEP_FINISHED": on_step_finished,
    "REASONING_MESSAGE_CONTENT": on_reasoning_message_content,
    "REASONING_ENCRYPTED_VALUE": on_reasoning_encrypted_value,
    "MESSAGES_SNAPSHOT": on_messages_snapshot,
    "CUSTOM": on_custom,
}
