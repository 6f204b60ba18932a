"""The AI SDK chunk mapping: UI message stream chunks to AG-UI events and, through the
service's AI SDK encoder, back to the chunks the producer sent."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.errors import InvalidEvent
from agent_replay.event_types import BY_NAME
from agent_replay.ingest.ui_chunks import UIChunkMapper
from agent_replay.projector.ai_sdk import UIMessageStreamEncoder

Chunk = dict[str, Any]
RUN, THREAD = "run-1", "thread-1"


def mapped(chunks: list[Chunk], mapper: UIChunkMapper | None = None) -> list[Chunk]:
    mapper = mapper or UIChunkMapper(RUN, THREAD)
    # Through JSON, as the log stores them.
    return [json.loads(json.dumps(e)) for i, c in enumerate(chunks) for e in mapper.feed(c, i)]


def encoded(events: list[Chunk], approvals: bool = True) -> list[Chunk]:
    encoder = UIMessageStreamEncoder(RUN, approvals=approvals)
    return [c for e in events for c in encoder.feed(e)] + encoder.end()


def as_served(chunks: list[Chunk]) -> list[Chunk]:
    """What the service sends for an upstream's `chunks`: its own `start` (the run's id
    and metadata), the upstream's start and finish metadata as message-metadata chunks."""
    out: list[Chunk] = []
    for chunk in chunks:
        if chunk["type"] == "start":
            out.append({"type": "start", "messageId": RUN,
                        "messageMetadata": {"runId": RUN, "threadId": THREAD}})  # fmt: skip
            if "messageMetadata" in chunk:
                out.append({"type": "message-metadata",
                            "messageMetadata": chunk["messageMetadata"]})  # fmt: skip
        elif chunk["type"] == "finish" and "messageMetadata" in chunk:
            out.append({"type": "message-metadata", "messageMetadata": chunk["messageMetadata"]})
            out.append({k: v for k, v in chunk.items() if k != "messageMetadata"})
        else:
            out.append(chunk)
    return out


# Every chunk type `ai` 7's uiMessageChunkSchema names (5 and 6 emit a subset), with the
# optional fields each may carry.
EVERY_TYPE: list[Chunk] = [
    {"type": "start", "messageId": "upstream-id", "messageMetadata": {"model": "m"}},
    {"type": "start-step"},
    {"type": "reasoning-start", "id": "r1", "providerMetadata": {"p": {"signature": "s"}}},
    {"type": "reasoning-delta", "id": "r1", "delta": "Think"},
    {"type": "reasoning-end", "id": "r1"},
    {"type": "reasoning-file", "url": "data:image/png;base64,AA==", "mediaType": "image/png"},
    {"type": "text-start", "id": "t1"},
    {"type": "text-delta", "id": "t1", "delta": "Hello "},
    {"type": "text-delta", "id": "t1", "delta": "world"},
    {"type": "text-end", "id": "t1", "citations": []},
    {"type": "tool-input-start", "toolCallId": "c1", "toolName": "weather", "title": "Weather"},
    {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"city":'},
    {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": ' "Paris"}'},
    {"type": "tool-input-available", "toolCallId": "c1", "toolName": "weather",
     "input": {"city": "Paris"}, "title": "Weather"},
    {"type": "tool-approval-request", "approvalId": "a1", "toolCallId": "c1"},
    {"type": "tool-approval-response", "approvalId": "a1", "approved": True},
    {"type": "tool-output-available", "toolCallId": "c1", "output": {"t": 21},
     "preliminary": True},
    {"type": "tool-output-available", "toolCallId": "c1", "output": "21"},
    {"type": "tool-input-start", "toolCallId": "c2", "toolName": "bad", "dynamic": True},
    {"type": "tool-input-delta", "toolCallId": "c2", "inputTextDelta": "{nope"},
    {"type": "tool-input-error", "toolCallId": "c2", "toolName": "bad", "input": "{nope",
     "errorText": "not JSON", "dynamic": True},
    {"type": "tool-input-start", "toolCallId": "c3", "toolName": "fails"},
    {"type": "tool-input-available", "toolCallId": "c3", "toolName": "fails", "input": {}},
    {"type": "tool-output-error", "toolCallId": "c3", "errorText": "it failed"},
    {"type": "tool-input-start", "toolCallId": "c4", "toolName": "denied"},
    {"type": "tool-input-available", "toolCallId": "c4", "toolName": "denied", "input": {}},
    {"type": "tool-output-denied", "toolCallId": "c4"},
    {"type": "source-url", "sourceId": "s1", "url": "https://example.com", "title": "E"},
    {"type": "source-document", "sourceId": "s2", "mediaType": "text/plain", "title": "D"},
    {"type": "file", "url": "data:text/plain;base64,QQ==", "mediaType": "text/plain"},
    {"type": "data-weather", "id": "w1", "data": {"t": 21}},
    {"type": "data-weather", "id": "w1", "data": {"t": 22}},
    {"type": "data-progress", "data": 0.5, "transient": True},
    {"type": "data-state", "data": {"n": 1}},
    {"type": "data-run.accepted", "data": "a data part with a name the service uses"},
    {"type": "custom", "kind": "provider.x"},
    {"type": "steering-message", "id": "sm", "parts": [{"type": "text", "text": "hi"}]},
    {"type": "message-metadata", "messageMetadata": {"usage": {"inputTokens": 3}}},
    {"type": "finish-step"},
    {"type": "reset-step"},
    {"type": "finish", "finishReason": "interrupted", "messageMetadata": {"done": True}},
]  # fmt: skip


def test_every_chunk_type_comes_back_from_the_encoder_as_the_producer_sent_it() -> None:
    assert encoded(mapped(EVERY_TYPE)) == as_served(EVERY_TYPE)


def test_an_approval_request_when_encoded_without_approvals_then_still_as_sent() -> None:
    # `?approvals=true` opts AG-UI producers' approvals in; an AI SDK producer's are its own.
    assert encoded(mapped(EVERY_TYPE), approvals=False) == as_served(EVERY_TYPE)


def test_every_mapped_event_has_the_fields_ag_ui_requires_of_its_type() -> None:
    for event in mapped(EVERY_TYPE):
        required = BY_NAME[event["type"]].required
        assert all(field in event for field in required), event


@pytest.mark.parametrize(
    ("last", "served"),
    [
        ({"type": "error", "errorText": "model overloaded"},
         {"type": "error", "errorText": "model overloaded"}),
        ({"type": "abort"}, {"type": "abort"}),
        ({"type": "abort", "reason": "user stop"}, {"type": "abort", "reason": "user stop"}),
    ],
)  # fmt: skip
def test_a_stream_that_fails_or_aborts_ends_the_run_as_it_said(last: Chunk, served: Chunk) -> None:
    chunks = [{"type": "start"}, {"type": "text-start", "id": "t"},
              {"type": "text-delta", "id": "t", "delta": "x"}, {"type": "text-end", "id": "t"},
              last, {"type": "finish"}]  # fmt: skip
    events = mapped(chunks)
    assert events[-1]["type"] == "RUN_ERROR"  # what followed the end was dropped
    assert encoded(events)[-1] == served


def test_a_stream_that_fails_mid_part_leaves_the_part_open_as_the_producer_did() -> None:
    chunks = [{"type": "start"}, {"type": "text-start", "id": "t"},
              {"type": "text-delta", "id": "t", "delta": "x"},
              {"type": "error", "errorText": "overloaded"}]  # fmt: skip
    assert encoded(mapped(chunks)) == as_served(chunks)


def test_a_part_id_a_later_step_uses_again_when_mapped_then_a_message_of_its_own() -> None:
    step = [{"type": "start-step"}, {"type": "text-start", "id": "0"},
            {"type": "text-delta", "id": "0", "delta": "x"}, {"type": "text-end", "id": "0"},
            {"type": "finish-step"}]  # fmt: skip
    events = mapped([{"type": "start"}, *step, *step, {"type": "finish"}])
    ids = [e["messageId"] for e in events if e["type"].startswith("TEXT_MESSAGE")]
    assert ids == ["0", "0", "0", "0:2", "0:2", "0:2"]
    # What the encoder made of the same id before: the client never shows it.
    renamed = [{**c, "id": "0:2"} if "id" in c else c for c in step]
    assert encoded(events) == as_served([{"type": "start"}, *step, *renamed, {"type": "finish"}])


def test_an_input_that_never_streamed_gives_a_started_call_with_that_input() -> None:
    chunks = [{"type": "start"},
              {"type": "tool-input-available", "toolCallId": "c", "toolName": "t",
               "input": {"q": [1, "two"]}, "dynamic": True},
              {"type": "tool-output-available", "toolCallId": "c", "output": [3]},
              {"type": "finish"}]  # fmt: skip
    out = encoded(mapped(chunks))
    assert [c["type"] for c in out[1:4]] == [
        "tool-input-start", "tool-input-delta", "tool-input-available"
    ]  # fmt: skip
    assert out[1] == {"type": "tool-input-start", "toolCallId": "c", "toolName": "t",
                      "dynamic": True}  # fmt: skip
    assert out[3] == chunks[1]
    assert out[4] == chunks[2]


def test_an_input_other_than_its_streamed_text_is_given_back_as_the_producer_sent_it() -> None:
    chunks = [{"type": "start"},
              {"type": "tool-input-start", "toolCallId": "c", "toolName": "t"},
              {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": '{"a": 1'},
              {"type": "tool-input-available", "toolCallId": "c", "toolName": "t",
               "input": {"a": 1, "fixed": True}},
              {"type": "finish"}]  # fmt: skip
    assert encoded(mapped(chunks)) == as_served(chunks)


def test_a_mapper_seeded_from_the_log_does_not_start_a_streamed_call_twice() -> None:
    first = [
        {"type": "start"},
        {"type": "tool-input-start", "toolCallId": "c", "toolName": "t"},
        {"type": "tool-input-delta", "toolCallId": "c", "inputTextDelta": "[1]"},
    ]
    second = [{"type": "tool-input-available", "toolCallId": "c", "toolName": "t",
               "input": [1]}]  # fmt: skip
    log = mapped(first)
    seeded = UIChunkMapper(RUN, THREAD)
    for event in log:
        seeded.observe(event)
    more = mapped(second, seeded)
    assert more == [{"type": "TOOL_CALL_END", "toolCallId": "c"}]
    assert encoded(log + more) == [*as_served(first + second), {"type": "finish"}]


def test_a_data_part_before_start_comes_after_the_run_started() -> None:
    chunks = [{"type": "data-status", "id": "s", "data": 1},
              {"type": "start", "messageId": "m", "messageMetadata": {"k": 1}},
              {"type": "finish"}]  # fmt: skip
    events = mapped(chunks)
    assert [e["type"] for e in events] == ["RUN_STARTED", "CUSTOM", "CUSTOM", "RUN_FINISHED"]
    assert encoded(events) == [
        *as_served([{"type": "start"}]), chunks[0],
        {"type": "message-metadata", "messageMetadata": {"k": 1}}, {"type": "finish"},
    ]  # fmt: skip


@pytest.mark.parametrize(
    "chunk",
    [[], "text-delta", {"type": ""}, {"delta": "x"}, {"type": "text-delta", "delta": "x"},
     {"type": "text-delta", "id": "t"}, {"type": "tool-input-start", "toolCallId": "c"},
     {"type": "tool-input-delta", "toolCallId": "c"}],
)  # fmt: skip
def test_a_chunk_missing_what_its_type_needs_is_refused(chunk: Any) -> None:
    with pytest.raises(InvalidEvent):
        UIChunkMapper(RUN, THREAD).feed(chunk)


# -- any well-formed stream ------------------------------------------------

_text = st.text(min_size=1, max_size=6)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=6,
)  # fmt: skip
_extra = st.dictionaries(st.sampled_from(["providerMetadata", "title"]),
                         st.just({"p": {"k": 1}}) | st.just("T"), max_size=1)  # fmt: skip


def _cuts(text: str, data: st.DataObject) -> list[str]:
    points = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=3)))
    bounds = [0, *[p for p in points if p < len(text)], len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]


@st.composite
def _streams(draw: st.DrawFn) -> list[Chunk]:
    data = draw(st.data())
    chunks: list[Chunk] = [{"type": "start"}]
    tools: list[str] = []
    for step in range(draw(st.integers(1, 3))):
        chunks.append({"type": "start-step"})
        for n in range(draw(st.integers(0, 4))):
            ident = f"{step}-{n}"
            kind = draw(st.sampled_from(["text", "reasoning", "tool", "data", "source"]))
            if kind in ("text", "reasoning"):
                chunks.append({"type": f"{kind}-start", "id": ident, **draw(_extra)})
                chunks += [{"type": f"{kind}-delta", "id": ident, "delta": d}
                           for d in draw(st.lists(_text, max_size=3))]  # fmt: skip
                chunks.append({"type": f"{kind}-end", "id": ident})
            elif kind == "tool":
                value = draw(st.dictionaries(st.text(max_size=3), _json, max_size=3))
                chunks.append({"type": "tool-input-start", "toolCallId": ident, "toolName": "t"})
                chunks += [{"type": "tool-input-delta", "toolCallId": ident, "inputTextDelta": d}
                           for d in _cuts(json.dumps(value), data)]  # fmt: skip
                chunks.append({"type": "tool-input-available", "toolCallId": ident,
                               "toolName": "t", "input": value, **draw(_extra)})  # fmt: skip
                tools.append(ident)
                outcome = draw(st.sampled_from(["output", "text", "error", "none"]))
                if outcome == "output":
                    chunks.append({"type": "tool-output-available", "toolCallId": ident,
                                   "output": draw(_json)})  # fmt: skip
                elif outcome == "text":
                    chunks.append(
                        {
                            "type": "tool-output-available",
                            "toolCallId": ident,
                            "output": draw(st.sampled_from(["1", "ok", '{"a":1}', ""])),
                        }
                    )
                elif outcome == "error":
                    chunks.append({"type": "tool-output-error", "toolCallId": ident,
                                   "errorText": draw(_text)})  # fmt: skip
            elif kind == "data":
                chunk: Chunk = {"type": f"data-{draw(st.sampled_from(['a', 'b', 'state']))}",
                                "data": draw(_json)}  # fmt: skip
                if draw(st.booleans()):
                    chunk["id"] = draw(st.sampled_from(["x", "y"]))
                if draw(st.booleans()):
                    chunk["transient"] = True
                chunks.append(chunk)
            else:
                chunks.append({"type": "source-url", "sourceId": ident, "url": "https://e.x"})
        chunks.append({"type": "finish-step"})
    ending = draw(st.sampled_from(["finish", "error", "abort"]))
    if ending == "finish":
        reason = draw(st.sampled_from([None, "stop", "tool-calls", "unknown"]))
        chunks.append({"type": "finish"} if reason is None else
                      {"type": "finish", "finishReason": reason})  # fmt: skip
    elif ending == "error":
        chunks.append({"type": "error", "errorText": draw(_text)})
    else:
        chunks.append({"type": "abort"})
    return chunks


@settings(max_examples=200, deadline=None)
@given(_streams())
def test_any_well_formed_stream_comes_back_from_the_encoder_as_it_was_sent(
    chunks: list[Chunk],
) -> None:
    assert encoded(mapped(chunks)) == as_served(chunks)
