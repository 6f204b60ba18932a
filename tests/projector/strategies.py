"""Hypothesis strategies for AG-UI logs: small id pools so events collide."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TYPES = [
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "RUN_STARTED",
    "RUN_FINISHED",
    "RUN_ERROR",
    "STEP_STARTED",
    "STEP_FINISHED",
    "REASONING_MESSAGE_CONTENT",
    "REASONING_ENCRYPTED_VALUE",
    "MESSAGES_SNAPSHOT",
    "CUSTOM",
    "TEXT_MESSAGE_CHUNK",
    "text_message_content",
    "SOMETHING_NEW",
]
CUSTOM_NAMES = [
    "structured-output.start",
    "structured-output.complete",
    "approval-requested",
    "ui-resource",
    "tool-input-available",
    "other",
]
FRAGMENTS = [
    '{"a":',
    '"x\\u00',
    "e9",
    '"}',
    "[1,",
    "2.5e",
    "]",
    "\ud83d",
    "\ude80",
    " ",
    "\n",
    "tru",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from(["", "m1", "m2", "t1", "t2", "r1", "s1", "user", "assistant", "tool_calls"]),
    st.sampled_from(FRAGMENTS),
    st.text(max_size=4),
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "id", "2"]), inner, max_size=3)
    ),
    max_leaves=6,
)
message_ids = st.sampled_from(["m1", "m2", "m3"])
call_ids = st.sampled_from(["t1", "t2"])
wire_message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system", "reasoning", "activity"])},
    optional={
        "id": message_ids,
        "content": st.one_of(st.sampled_from(["", "hi", '{"r":1}']), json_values),
        "toolCallId": call_ids,
        "toolCalls": st.lists(
            st.fixed_dictionaries(
                {
                    "id": call_ids,
                    "function": st.fixed_dictionaries(
                        {"name": st.just("f"), "arguments": st.sampled_from(["{}", "x"])}
                    ),
                }
            ),
            max_size=2,
        ),
        "parts": st.lists(
            st.fixed_dictionaries({"type": st.just("text"), "content": st.text(max_size=3)}),
            max_size=2,
        ),
        "metadata": json_values,
        "error": st.just("failed"),
    },
)
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "messageId": st.one_of(message_ids, json_values),
    "parentMessageId": message_ids,
    "role": st.sampled_from(["assistant", "user", "system"]),
    "delta": st.one_of(st.sampled_from(FRAGMENTS), json_values),
    "toolCallId": st.one_of(call_ids, json_values),
    "toolCallName": st.sampled_from(["search", "write"]),
    "content": st.one_of(st.sampled_from(['{"error":"e"}', "plain", "5"]), json_values),
    "state": st.sampled_from(["output-error", "complete"]),
    "runId": st.sampled_from(["r1", "r2"]),
    "finishReason": st.sampled_from(["stop", "tool_calls"]),
    "message": json_values,
    "stepName": st.sampled_from(["s1", "s2", ""]),
    "stepId": st.sampled_from(["s1", "m1"]),
    "signature": st.sampled_from(["sig", ""]),
    "subtype": st.sampled_from(["message", "tool-call"]),
    "entityId": st.sampled_from(["t1", "s1"]),
    "encryptedValue": st.sampled_from(["enc", ""]),
    "input": json_values,
    "name": st.sampled_from(CUSTOM_NAMES),
    "value": st.one_of(
        json_values,
        st.fixed_dictionaries(
            {},
            optional={
                "messageId": message_ids,
                "toolCallId": call_ids,
                "approval": st.fixed_dictionaries({"id": st.just("ap")}),
                "object": json_values,
                "raw": st.sampled_from(["", '{"a":1}']),
                "resource": st.just({"uri": "ui://x", "mimeType": "text/html"}),
            },
        ),
    ),
    "metadata": st.one_of(
        json_values,
        st.just(
            {
                "tanstack": {
                    "createdAt": "2024-01-02T03:04:05Z",
                    "content": "x",
                    "finishReason": "stop",
                }
            }
        ),
    ),
    "outcome": st.just(
        {
            "type": "interrupt",
            "interrupts": [{"id": "i", "toolCallId": "t1", "reason": "approval_required"}],
        }
    ),
    "messages": st.lists(wire_message, max_size=3),
    "timestamp": st.integers(1_700_000_000_000, 1_800_000_000_000),
}


@st.composite
def chunks(draw: st.DrawFn) -> dict[str, Any]:
    """Any well-formed chunk: a string type and a few of the known fields."""
    chunk: dict[str, Any] = {"type": draw(st.sampled_from(TYPES))}
    for key in draw(st.lists(st.sampled_from(sorted(FIELDS)), max_size=6, unique=True)):
        chunk[key] = draw(FIELDS[key])
    return chunk


logs = st.lists(chunks(), max_size=30)
