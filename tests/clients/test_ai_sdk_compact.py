"""The AI SDK's compact resume prefix, over the demo agent's log and random logs.

A client resuming at any seq gets the compact prefix of the stream so far, then the
chunks the same encoder makes of the events after it: the stream must be one the
client accepts (`check_ui_stream`, the rules of `processUIMessageStream`) and fold
into the message an uninterrupted client folds (`build_message`), and the prefix must
hold each part once (one start, at most one delta, its end if it ended).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.projector.ai_sdk import UIMessageStreamEncoder
from agent_replay.projector.ai_sdk_compact import UIMessageStreamCompactor
from agent_replay.projector.ai_sdk_messages import build_message
from tests.clients.test_encoders import V5_TYPES, check_ui_stream, demo_log, encode, state_events
from tests.projector.strategies import chunks

PART_DELTAS = {"text-delta": "id", "reasoning-delta": "id", "tool-input-delta": "toolCallId"}


def resumed(log: list[Any], cut: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The prefix a client resuming after `cut` events is sent, and the whole stream it reads."""
    encoder = UIMessageStreamEncoder("r1")
    compactor = UIMessageStreamCompactor()
    for event in log[:cut]:
        compactor.add(encoder.feed(event))
    prefix = compactor.prefix()
    rest = [chunk for event in log[cut:] for chunk in encoder.feed(event)]
    return prefix, prefix + rest + encoder.end()


def check_whole_parts(prefix: list[dict[str, Any]]) -> None:
    """Each part's content at most once in the prefix, and never before its start."""
    deltas = Counter(
        (c["type"], c[PART_DELTAS[c["type"]]]) for c in prefix if c["type"] in PART_DELTAS
    )
    assert all(n == 1 for n in deltas.values()), deltas
    opening = ("text-start", "reasoning-start", "tool-input-start")
    starts = Counter(
        (c["type"], c.get("id", c.get("toolCallId"))) for c in prefix if c["type"] in opening
    )
    assert all(n == 1 for n in starts.values()), starts


def test_compact_resume_when_demo_run_cut_anywhere_then_valid_and_same_message() -> None:
    log = demo_log()
    whole = encode(log)
    expected = build_message("r1", whole)
    for cut in range(len(log) + 1):
        prefix, stream = resumed(log, cut)
        check_ui_stream(stream, V5_TYPES)
        check_whole_parts(prefix)
        assert build_message("r1", stream) == expected, cut
    # Mid-answer: the text so far is one delta, the part left open for what follows.
    middle = next(i for i, e in enumerate(log) if e.get("type") == "TOOL_CALL_START")
    prefix, _ = resumed(log, middle + 2)
    kinds = [c["type"] for c in prefix]
    assert kinds == [
        "start", "text-start", "reasoning-start", "reasoning-delta", "reasoning-end",
        "text-delta", "text-end", "tool-input-start", "tool-input-delta",
    ], kinds  # fmt: skip
    assert len(prefix) < middle + 2


def _text_log(deltas: int) -> list[dict[str, Any]]:
    words = [f"w{n} " for n in range(deltas)]
    return [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": w} for w in words),
    ]


def test_compact_resume_when_long_answer_then_prefix_bytes_grow_with_content_not_deltas() -> None:
    log = _text_log(20_000)
    content = sum(len(e["delta"]) for e in log[2:])
    prefix, stream = resumed(log, len(log))
    full = [c for e in log for c in UIMessageStreamEncoder("r1").feed(e)]
    sent = len(json.dumps(prefix))
    # The text once plus a few chunks' framing; a replay pays a frame per delta on top.
    assert sent < content + 500, (sent, content)
    assert len(json.dumps(full)) > 5 * sent
    assert [c["type"] for c in prefix] == ["start", "text-start", "text-delta"]
    assert build_message("r1", stream)["parts"][0]["text"] == "".join(e["delta"] for e in log[2:])


def test_compact_resume_when_tool_input_complete_then_only_its_available_chunk_carries_it() -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"q": '},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '"oslo"}'},
        {"type": "TOOL_CALL_START", "toolCallId": "d", "toolCallName": "g"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "d", "delta": '{"n": '},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "d", "delta": "1"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
    ]
    prefix, stream = resumed(log, len(log))
    assert [c["type"] for c in prefix] == [
        "start", "tool-input-start", "tool-input-start", "tool-input-delta", "tool-input-available",
    ]  # fmt: skip
    # The open call's input as far as it streamed, in one piece.
    assert prefix[3] == {"type": "tool-input-delta", "toolCallId": "d", "inputTextDelta": '{"n": 1'}
    assert build_message("r1", stream) == build_message("r1", encode(log))


def test_compact_resume_when_state_changes_often_then_one_state_part_with_the_last_value() -> None:
    log: list[dict[str, Any]] = [{"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"}]
    log += [{"type": "STATE_SNAPSHOT", "snapshot": {"n": n}} for n in range(50)]
    log += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}]
    log += [{"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 99}]}]
    prefix, stream = resumed(log, len(log))
    states = [c for c in prefix if c["type"] == "data-state"]
    assert states == [{"type": "data-state", "data": {"n": 99}, "id": "state"}]
    # In its first place: before the text that came after the first snapshot.
    assert [c["type"] for c in prefix][:3] == ["start", "data-state", "text-start"]
    assert build_message("r1", stream) == build_message("r1", encode(log))


# Long runs of content among the random events, so parts take many deltas.
contents = st.builds(
    lambda kind, ident, delta: {"type": kind, "messageId": ident, "delta": delta},
    st.sampled_from(["TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"]),
    st.sampled_from(["m1", "m2"]),
    st.sampled_from(["a", "bc", "é", "\ud83d"]),
)
args = st.builds(
    lambda call, delta: {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": delta},
    st.sampled_from(["t1", "t2"]),
    st.sampled_from(['{"a":', "1", "}", '"x']),
)
long_logs = st.lists(st.one_of(chunks(), state_events, contents, contents, args), max_size=60)


@settings(max_examples=400, deadline=None)
@given(log=long_logs, cut=st.integers(min_value=0, max_value=62))
def test_compact_resume_when_any_log_cut_anywhere_then_client_gets_the_same_message(
    log: list[Any], cut: int
) -> None:
    log = [{"type": "CUSTOM", "name": "run.accepted"}, {"type": "RUN_STARTED"}, *log]
    cut = min(cut, len(log))
    prefix, stream = resumed(log, cut)
    check_ui_stream(stream, V5_TYPES)
    check_whole_parts(prefix)
    assert build_message("r1", stream) == build_message("r1", encode(log))
