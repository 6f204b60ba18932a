"""The pure encoders for AI SDK and AG-UI clients, over the demo agent's log and random logs.

Each encoded stream is checked against the rules the real clients enforce
(`processUIMessageStream` in npm `ai`, `verifyEvents` in `@ag-ui/client`),
written out here so that a stream the client would reject fails a test.
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.agents.demo import demo_agent
from agent_replay.projector.agui import AguiProjection, AguiRelay, AguiResume
from agent_replay.projector.ai_sdk import UIMessageStreamEncoder
from agent_replay.projector.ai_sdk_messages import build_message
from tests.projector.strategies import chunks, json_values, scalars

V5_TYPES = {
    "start", "finish", "abort", "error", "message-metadata", "start-step", "finish-step",
    "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta",
    "reasoning-end", "tool-input-start", "tool-input-delta", "tool-input-available",
    "tool-input-error", "tool-output-available", "tool-output-error",
}  # fmt: skip
COMMON_FINISH = {"stop", "length", "content-filter", "tool-calls", "error", "other"}

patches = st.lists(
    st.one_of(
        st.fixed_dictionaries({"op": st.just("add"), "path": st.sampled_from(["/n", "/m"]),
                               "value": scalars}),
        st.fixed_dictionaries({"op": st.just("remove"), "path": st.sampled_from(["/n", "/x"])}),
        st.fixed_dictionaries({"op": st.just("replace"), "path": st.just(""),
                               "value": json_values}),
    ),
    max_size=3,
)  # fmt: skip
state_events = st.one_of(
    st.builds(lambda v: {"type": "STATE_SNAPSHOT", "snapshot": v}, json_values),
    st.builds(lambda d: {"type": "STATE_DELTA", "delta": d}, patches),
)
logs_with_state = st.lists(st.one_of(chunks(), state_events), max_size=30)


def demo_log(question: str = "Is it cold?") -> list[dict[str, Any]]:
    async def collect() -> list[dict[str, Any]]:
        run_input = {"runId": "r1", "threadId": "t1",
                     "messages": [{"id": "u1", "role": "user", "content": question}]}  # fmt: skip
        return [chunk async for chunk in demo_agent(0).source(run_input)]

    accepted = {"type": "CUSTOM", "name": "run.accepted", "value": {"runId": "r1"}}
    return [accepted, *asyncio.run(collect())]


def encode(log: list[Any], approvals: bool = False) -> list[dict[str, Any]]:
    encoder = UIMessageStreamEncoder("r1", approvals=approvals)
    out = [chunk for event in log for chunk in encoder.feed(event)]
    return out + encoder.end()


def check_ui_stream(chunks: list[dict[str, Any]], allowed: set[str]) -> None:
    """What the AI SDK's client accepts: one start first, content only for open parts,
    tool events only for started calls, one terminal chunk last."""
    assert chunks and chunks[0]["type"] == "start", chunks[:1]
    assert chunks[-1]["type"] in ("finish", "error", "abort")
    text: set[str] = set()
    reasoning: set[str] = set()
    used: set[tuple[str, str]] = set()  # the client keeps text and reasoning ids apart
    tools: set[str] = set()
    for chunk in chunks[1:-1]:
        kind = chunk["type"]
        assert kind in allowed or kind.startswith("data-"), kind
        assert kind not in ("start", "finish", "error", "abort"), chunks
        if kind.endswith("-start") and kind in ("text-start", "reasoning-start"):
            opened = text if kind == "text-start" else reasoning
            assert (kind, chunk["id"]) not in used, f"part id reused: {chunk}"
            used.add((kind, chunk["id"]))
            opened.add(chunk["id"])
        elif kind in ("text-delta", "reasoning-delta"):
            assert chunk["id"] in (text if kind == "text-delta" else reasoning), chunk
            assert isinstance(chunk["delta"], str)
        elif kind in ("text-end", "reasoning-end"):
            (text if kind == "text-end" else reasoning).remove(chunk["id"])
        elif kind == "finish-step":
            assert not text and not reasoning, "parts left open across a step"
        elif kind == "tool-input-start":
            assert chunk["toolCallId"] not in tools
            tools.add(chunk["toolCallId"])
        elif kind.startswith("tool-"):
            assert chunk["toolCallId"] in tools, chunk
    if chunks[-1]["type"] == "finish":
        assert chunks[-1].get("finishReason", "stop") in COMMON_FINISH
        assert not text and not reasoning


def test_ai_sdk_encoder_when_demo_run_then_one_message_in_stream_order() -> None:
    chunks = encode(demo_log())
    check_ui_stream(chunks, V5_TYPES)
    kinds = [c["type"] for c in chunks if not c["type"].endswith("-delta")]
    assert kinds == [
        "start", "text-start", "reasoning-start", "reasoning-end", "text-end",
        "tool-input-start", "tool-input-available", "tool-output-available",
        "text-start", "text-end", "finish",
    ]  # fmt: skip
    message = build_message("r1", chunks)
    assert [p["type"] for p in message["parts"]] == [
        "text", "reasoning", "tool-get_weather", "text",
    ]  # fmt: skip
    assert message["parts"][2] == {
        "type": "tool-get_weather", "toolCallId": "r1-call", "state": "output-available",
        "input": {"city": "Oslo", "units": "metric"},
        "output": {"city": "Oslo", "tempC": -3, "conditions": "snow"},
    }  # fmt: skip
    assert message["parts"][3]["text"] == "It is -3 °C and snowing in Oslo ❄️. Dress warmly!"
    assert message["metadata"] == {"runId": "r1", "threadId": "t1"}
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


def test_ai_sdk_encoder_when_text_goes_on_after_tool_call_then_new_part_after_the_tool() -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "before "},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "f", "parentMessageId": "m"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": "{not json"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "after"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "runId": "r1", "threadId": "t1", "usage": {"totalTokens": 7}},
    ]
    chunks = encode(log)
    check_ui_stream(chunks, V5_TYPES)
    message = build_message("r1", chunks)
    assert [(p["type"], p.get("text")) for p in message["parts"]] == [
        ("text", "before "), ("tool-f", None), ("text", "after"),
    ]  # fmt: skip
    assert message["parts"][1]["state"] == "output-error"
    assert message["parts"][1]["rawInput"] == "{not json"
    assert {"type": "message-metadata", "messageMetadata": {"usage": {"totalTokens": 7}}} in chunks
    assert message["metadata"]["usage"] == {"totalTokens": 7}


def test_ai_sdk_encoder_when_run_cancelled_then_abort_and_nothing_after() -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hal"},
        {"type": "RUN_ERROR", "message": "the run was cancelled", "code": "cancelled"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "f"},
    ]
    chunks = encode(log)
    assert [c["type"] for c in chunks] == ["start", "text-start", "text-delta", "text-end", "abort"]
    failed = encode([*log[:3], {"type": "RUN_ERROR", "message": "boom", "code": "upstream_error"}])
    assert failed[-1] == {"type": "error", "errorText": "boom"}


def test_ai_sdk_encoder_when_loop_finishes_twice_then_one_finish_at_the_end() -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "STEP_STARTED", "stepName": "a"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "one"},
        {"type": "STEP_FINISHED", "stepName": "a"},
        {"type": "RUN_FINISHED", "runId": "r1", "threadId": "t1", "finishReason": "tool_calls"},
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TEXT_MESSAGE_CHUNK", "messageId": "m", "delta": "two"},
        {"type": "RUN_FINISHED", "runId": "r1", "threadId": "t1", "finishReason": "weird"},
    ]
    chunks = encode(log)
    check_ui_stream(chunks, V5_TYPES)
    assert [c["type"] for c in chunks].count("finish") == 1
    assert chunks[-1] == {"type": "finish", "finishReason": "other"}
    texts = [p["text"] for p in build_message("r1", chunks)["parts"] if p["type"] == "text"]
    assert texts == ["one", "two"]


def test_ai_sdk_encoder_when_approval_requested_then_approval_chunk_only_when_asked() -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r1", "threadId": "t1"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "rm"},
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "CUSTOM", "name": "approval-requested",
         "value": {"toolCallId": "c", "approval": {"id": "a1"}}},
        {"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}},
        {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/n", "value": 2}]},
    ]  # fmt: skip
    with_approvals = encode(log, approvals=True)
    assert {
        "type": "tool-approval-request",
        "approvalId": "a1",
        "toolCallId": "c",
    } in with_approvals
    plain = encode(log)
    assert not any(c["type"] == "tool-approval-request" for c in plain)
    assert any(c["type"] == "data-approval-requested" for c in plain)
    message = build_message("r1", plain)
    assert [p for p in message["parts"] if p["type"] == "data-state"] == [
        {"type": "data-state", "id": "state", "data": {"n": 2}}
    ]
    approved = build_message("r1", with_approvals)
    assert approved["parts"][0]["state"] == "approval-requested"


@settings(max_examples=300, deadline=None)
@given(log=logs_with_state)
def test_ai_sdk_encoder_when_any_log_then_stream_is_one_the_client_accepts(log: list[Any]) -> None:
    chunks = encode(log)
    check_ui_stream(chunks, V5_TYPES)
    build_message("r1", chunks)  # the fold (the client's rules) never fails on it


def check_agui_sequence(events: list[dict[str, Any]]) -> None:
    """What `@ag-ui/client`'s verifier rejects: a first event other than RUN_STARTED
    (or RUN_ERROR), content for entities not open, anything after a terminal event."""
    assert events, "an empty stream"
    assert events[0]["type"] in ("RUN_STARTED", "RUN_ERROR"), events[0]
    messages: set[str] = set()
    tools: set[str] = set()
    reasoning: set[str] = set()
    ended = False
    for event in events:
        kind = event["type"]
        assert not (kind == "CUSTOM" and event.get("name") == "run.accepted")
        if ended:
            assert kind == "RUN_STARTED", event
        if kind == "RUN_STARTED":
            messages.clear(), tools.clear(), reasoning.clear()
            ended = False
        elif kind in ("RUN_FINISHED", "RUN_ERROR"):
            ended = True
        elif kind == "TEXT_MESSAGE_START":
            assert event["messageId"] not in messages
            messages.add(event["messageId"])
        elif kind in ("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"):
            assert event["messageId"] in messages, event
            if kind == "TEXT_MESSAGE_END":
                messages.remove(event["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            reasoning.add(event["messageId"])
        elif kind in ("REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"):
            assert event["messageId"] in reasoning, event
            if kind == "REASONING_MESSAGE_END":
                reasoning.remove(event["messageId"])
        elif kind == "TOOL_CALL_START":
            assert event["toolCallId"] not in tools
            tools.add(event["toolCallId"])
        elif kind in ("TOOL_CALL_ARGS", "TOOL_CALL_END"):
            assert event["toolCallId"] in tools, event
            if kind == "TOOL_CALL_END":
                tools.remove(event["toolCallId"])


def resumed(log: list[Any], cut: int, run_input: dict[str, Any]) -> list[dict[str, Any]]:
    """What a client that forgot everything gets when it joins after `cut` events."""
    join = AguiResume(AguiProjection.for_input(run_input))
    for event in log[:cut]:
        join.skip(event)
    return join.begin() + [out for event in log[cut:] for out in join.feed(event)]


RUN_INPUT = {
    "messages": [{"id": "u1", "role": "user", "content": "Is it cold?"}],
    "state": {"n": 0},
}


def test_agui_prefix_when_joining_anywhere_in_demo_run_then_valid_and_same_messages() -> None:
    log = demo_log()
    whole = AguiProjection.for_input(RUN_INPUT)
    for event in log:
        whole.apply(event)
    for cut in range(len(log) + 1):
        events = resumed(log, cut, RUN_INPUT)
        check_agui_sequence(events)
        client = AguiProjection()
        for event in events:
            client.apply(event)
        assert client.messages == whole.messages, cut
    mid = resumed(log, 20, RUN_INPUT)
    assert [e["type"] for e in mid[:2]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    assert mid[1]["messages"][0] == RUN_INPUT["messages"][0]


def test_agui_relay_when_log_starts_with_run_accepted_then_dropped() -> None:
    log = demo_log()
    relay = AguiRelay()
    events = [out for event in log for out in relay.feed(event)]
    check_agui_sequence(events)
    assert events == log[1:]


valid_cut = st.integers(min_value=0, max_value=40)


@settings(max_examples=300, deadline=None)
@given(log=logs_with_state, cut=valid_cut)
def test_agui_prefix_when_any_log_cut_anywhere_then_client_state_is_the_same(
    log: list[Any], cut: int
) -> None:
    # A hosted run's log: the service's marker, then the agent's events from RUN_STARTED.
    log = [{"type": "CUSTOM", "name": "run.accepted"}, {"type": "RUN_STARTED"}, *log]
    whole = AguiProjection.for_input(RUN_INPUT)
    for event in log:
        whole.apply(event)
    client = AguiProjection()
    for event in resumed(log, min(cut, len(log)), RUN_INPUT):
        client.apply(event)
    assert client.messages == whole.messages
    assert client.state == whole.state
