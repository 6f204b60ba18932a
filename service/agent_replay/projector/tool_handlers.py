"""Tool-call events (spec §7): start, argument deltas, end, result, approval,
Gemini thought signatures. Named after TanStack's ``handleToolCall*Event``."""

from __future__ import annotations

from typing import Any

from agent_replay.projector.draft import ToolCallDraft
from agent_replay.projector.jsvalues import (
    UNDEF,
    JSONParseError,
    coalesce,
    get,
    key_of,
    nullish,
    or_empty,
    parse_json,
    same,
    spread,
    stringify,
    tanstack_bag,
    truthy,
)
from agent_replay.projector.processor import StreamState
from agent_replay.projector.updaters import (
    update_tool_call_approval,
    update_tool_call_arguments,
    update_tool_call_part,
    update_tool_call_with_output,
    update_tool_result_part,
    with_thought_signature,
)

Chunk = dict[str, Any]


def on_tool_call_start(st: StreamState, chunk: Chunk) -> None:
    target = coalesce(chunk.get("parentMessageId", UNDEF), st.recent(), UNDEF)
    ident, draft = st.resolve(target)
    draft.tool_since_text = True
    call_id = chunk.get("toolCallId", UNDEF)
    key = key_of(call_id)
    if key in draft.calls:
        return  # a duplicate start in the same message is ignored
    name = chunk.get("toolCallName", UNDEF)
    metadata = chunk.get("metadata", UNDEF)
    call = draft.calls[key] = ToolCallDraft(call_id, name, metadata)
    st.tool_index[key] = ident
    fields = {"id": call_id, "name": name, "arguments": call.args.ref(), "state": call.state}
    fields["metadata"] = metadata
    st.put_call(ident, fields)


def on_tool_call_args(st: StreamState, chunk: Chunk) -> None:
    call_id = chunk.get("toolCallId", UNDEF)
    key = call_id if type(call_id) is str else key_of(call_id)
    ident = st.tool_index.get(key)
    if not truthy(ident):
        return
    draft = st.draft(ident)
    call = draft.calls.get(key) if draft is not None else None
    if call is None:
        return  # arguments before the start (or for an unknown call) are lost
    delta = chunk.get("delta", UNDEF)
    call.args.append(delta if type(delta) is str else or_empty(delta))
    if call.state == "awaiting-input" and truthy(delta):
        call.state = "input-streaming"
    # Only the draft's fields: the part keeps input/metadata/output/approval
    # from before, and its state is overwritten with the draft's.
    arguments = call.args.ref()
    for message in st.each(ident):
        position = message.find("tool-call", call_id)
        existing = message.part_at(position)
        if existing is None:  # the part went away (a snapshot): rebuild it
            fields = {"id": call.id, "name": call.name, "arguments": arguments, "state": call.state}
            message.put(position, update_tool_call_part(None, fields))
        else:
            message.put(
                position, update_tool_call_arguments(existing, call.name, arguments, call.state)
            )


def on_tool_call_end(st: StreamState, chunk: Chunk) -> None:
    key = key_of(chunk.get("toolCallId", UNDEF))
    ident = st.tool_index.get(key)
    if not truthy(ident):
        return
    draft = st.draft(ident)
    if draft is None:
        return
    given = chunk.get("input", UNDEF)
    if given is UNDEF:
        given = get(tanstack_bag(chunk), "input")
    call = draft.calls.get(key)
    if call is None or call.state == "input-complete":
        return  # a second END changes nothing
    if given is not UNDEF and call.args.size == 0:
        call.args.append(stringify(given))
    st.complete_call(ident, call)
    if given is not UNDEF:
        # The canonical input wins, also over an approval state.
        fields = {
            "id": call.id,
            "name": call.name,
            "arguments": call.args.ref(),
            "state": "input-complete",
            "input": given,
            "metadata": call.metadata,
        }
        st.put_call(ident, fields)


def tool_result_error(output: Any) -> Any:
    """``extractToolResultError``."""
    if isinstance(output, dict) and isinstance(output.get("error"), str):
        return output["error"]
    return output if isinstance(output, str) else "Tool execution failed"


def _first_holder(st: StreamState, call_id: Any) -> Any:
    for message in st.messages:
        if message.find("tool-call", call_id) >= 0:
            return message.id
    return UNDEF


def on_tool_call_result(st: StreamState, chunk: Chunk) -> None:
    call_id = chunk.get("toolCallId", UNDEF)
    ident = st.tool_index.get(key_of(call_id), UNDEF)
    if nullish(ident):
        ident = _first_holder(st, call_id)
    if not truthy(ident):
        return
    failed = (
        chunk.get("state") == "output-error" or get(tanstack_bag(chunk), "state") == "output-error"
    )
    content = chunk.get("content", UNDEF)
    try:
        output = parse_json(content)
    except JSONParseError:
        output = content
    state = "error" if failed else "complete"
    for message in st.messages:
        position = message.find("tool-call", call_id)
        if position >= 0:
            message.put(
                position, update_tool_call_with_output(message.parts[position], output, state)
            )
    error = tool_result_error(output) if failed else UNDEF
    part = update_tool_result_part(call_id, content, state, error)
    for message in st.each(ident):
        message.put(message.find("tool-result", call_id), part)


def request_approval(st: StreamState, ident: Any, call_id: Any, approval_id: Any) -> None:
    """``updateToolCallApproval`` on the messages with this id."""
    for message in st.each(ident):
        position = message.find("tool-call", call_id)
        if position >= 0:
            message.put(position, update_tool_call_approval(message.parts[position], approval_id))


def on_approval_requested(st: StreamState, value: Any, active: Any) -> None:
    """CUSTOM ``approval-requested`` (legacy approval path)."""
    call_id = get(value, "toolCallId")
    approval = get(value, "approval")
    target = coalesce(active, st.tool_index.get(key_of(call_id), UNDEF))
    if truthy(target) and not nullish(approval):
        request_approval(st, target, call_id, get(approval, "id"))


def on_interrupts(st: StreamState, interrupts: Any) -> bool:
    """Approval interrupts of ``RUN_FINISHED``; False where the reference throws."""
    if not isinstance(interrupts, list) or any(item is None for item in interrupts):
        return False
    for interrupt in interrupts:
        if not isinstance(interrupt, dict):
            continue
        metadata = interrupt.get("metadata")
        kind = metadata.get("kind") if isinstance(metadata, dict) else None
        call_id = interrupt.get("toolCallId", UNDEF)
        if not truthy(call_id):
            continue
        if kind != "approval" and interrupt.get("reason") != "approval_required":
            continue
        target = st.recent()
        if nullish(target):
            target = st.tool_index.get(key_of(call_id), UNDEF)
        if nullish(target):
            target = next(
                (
                    m.id
                    for m in st.messages
                    if m.role == "assistant" and m.find("tool-call", call_id) >= 0
                ),
                UNDEF,
            )
        if truthy(target):
            request_approval(st, target, call_id, interrupt.get("id", UNDEF))
    return True


def attach_tool_call_signature(st: StreamState, call_id: Any, signature: str) -> None:
    """``REASONING_ENCRYPTED_VALUE`` subtype tool-call: every matching part and draft."""
    for message in st.messages:
        for position, part in enumerate(message.parts):
            if (
                isinstance(part, dict)
                and part.get("type") == "tool-call"
                and same(part.get("id", UNDEF), call_id)
            ):
                message.put(position, with_thought_signature(part, signature))
    key = key_of(call_id)
    for draft in st.drafts.values():
        call = draft.calls.get(key)
        if call is not None:
            call.metadata = {**spread(coalesce(call.metadata, {})), "thoughtSignature": signature}
