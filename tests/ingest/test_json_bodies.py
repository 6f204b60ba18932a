"""A JSON append body's events, as the log stores them: each one's text means the
same JSON value as the event sent, whichever way the body was written, and a
body the exact parser refuses is refused whichever path reads it."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from agent_replay.errors import InvalidEvent, InvalidJson, InvalidRequest, PayloadTooLarge
from agent_replay.ingest import Limits, parse_json_batch
from agent_replay.ingest.verbatim import split_events
from agent_replay.log.chunks import Chunks, loads, storable, text_at, texts_of, types_of
from agent_replay.log.rows import BATCH_MIN
from tests.ingest.jsonvalues import same

LIMITS = Limits()


@pytest.mark.parametrize(
    "number", [-(2**63) - 1, -(2**63), -(10**19) + 1, 2**64, 2**64 - 1, -(10**25), 10**25]
)
def test_loads_when_an_integer_at_or_past_64_bits_then_kept_exact(number: int) -> None:
    """orjson reads an integer past 64 bits as a float; `loads` keeps it whole, whether
    it has 20 digits or a minus and 19."""
    value = loads(f'{{"type":"A","n":{number}}}')["n"]
    assert type(value) is int and value == number


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
ids = st.none() | st.text(max_size=10) | st.integers(0, 9)
events = st.builds(
    lambda kind, message_id, tool_call_id, rest: {
        **rest,
        "type": kind,
        **({} if message_id is None else {"messageId": message_id}),
        **({} if tool_call_id is None else {"toolCallId": tool_call_id}),
    },
    st.sampled_from(["TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "RUN_FINISHED"])
    | st.text(min_size=1, max_size=8),
    ids,
    ids,
    st.dictionaries(st.sampled_from(["delta", "x", "args", "n"]), values, max_size=3),
)


def written(envelope: dict[str, Any], style: str) -> bytes:
    if style == "compact":  # as JSON.stringify writes it
        compact = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
        return compact.encode("utf-8", "surrogatepass")
    if style == "spaced":
        return json.dumps(envelope).encode()  # ", " and ": ", non-ASCII escaped
    if style == "unescaped":
        return json.dumps(envelope, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return json.dumps(envelope, indent=2).encode()  # raw newlines between tokens


@settings(max_examples=300, deadline=None)
@given(
    st.lists(events, min_size=1, max_size=40),  # from 16, kept as columns
    st.sampled_from(["compact", "spaced", "unescaped", "indented"]),
    st.none() | st.integers(1, 1000),
    st.booleans(),
)
def test_json_body_when_written_any_way_then_each_text_is_the_event_sent(
    sent: list[dict[str, Any]], style: str, expected_seq: int | None, close: bool
) -> None:
    envelope: dict[str, Any] = {"events": sent, "close": close}
    if expected_seq is not None:
        envelope["expected_seq"] = expected_seq
    body = written(envelope, style)
    try:
        batch = parse_json_batch(body, LIMITS)
    except InvalidJson:
        # Only what the exact parser refuses (invalid UTF-8 from a lone surrogate).
        with pytest.raises(InvalidJson):
            loads(body)
        return
    assert batch.expected_seq == expected_seq and batch.close is close
    assert len(batch.chunks) == len(sent)
    for chunk, event in zip(batch.chunks, sent, strict=True):
        assert "\n" not in chunk.text and "\r" not in chunk.text
        assert same(loads(chunk.text), event)
        assert chunk.type == storable(event["type"])
        for column, field in ((chunk.message_id, "messageId"), (chunk.tool_call_id, "toolCallId")):
            value = event.get(field)
            assert column == (storable(value) if isinstance(value, str) else None)


# Events the verbatim path takes (plain ASCII types, no number near a double's
# range), whatever their ids and other values.
plain_events = st.builds(
    lambda kind, message_id, tool_call_id, rest: {
        **rest,
        "type": kind,
        **({} if message_id is None else {"messageId": message_id}),
        **({} if tool_call_id is None else {"toolCallId": tool_call_id}),
    },
    st.sampled_from(["TEXT_MESSAGE_CONTENT", "RUN_FINISHED"])
    | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=8),
    ids,
    ids,
    st.dictionaries(
        st.sampled_from(["delta", "x", "args", "n"]),
        st.recursive(
            st.none() | st.integers(-(10**30), 10**30) | st.text(max_size=12),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
            max_leaves=6,
        ),
        max_size=3,
    ),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(plain_events, min_size=BATCH_MIN, max_size=60), st.data())
def test_large_body_when_kept_as_columns_then_every_reading_gives_the_same_chunks(
    sent: list[dict[str, Any]], data: st.DataObject
) -> None:
    """A large body's `Chunks`, read by position (from either end, or a slice), in turn,
    or as columns (types, texts, texts joined), give the same chunks, and the same as
    the body read a tuple per chunk."""
    body = written({"events": sent}, "compact")
    split = split_events(body)
    # Not a body the verbatim path takes (a type that is not plain ASCII, a lone
    # surrogate): the test above covers those.
    assume(split is not None)
    assert split is not None
    columns = split[0]
    assert type(columns) is Chunks
    whole = list(columns)
    # As a log storing a row per event gets them (a tuple each, ids read with the
    # types, or the general path's where an id is no plain string): the same types
    # and ids, and the same texts where the body's slices are kept either way.
    rows = parse_json_batch(body, LIMITS, None).chunks
    assert type(rows) is list
    assert [c[:1] + c[2:] for c in rows] == [c[:1] + c[2:] for c in whole]
    tuples = split_events(body, None)
    assert tuples is None or tuples[0] == whole
    assert [columns[i] for i in range(len(sent))] == whole
    assert [columns[i - len(sent)] for i in range(len(sent))] == whole
    start, stop = sorted(data.draw(st.lists(st.integers(0, len(sent)), min_size=2, max_size=2)))
    assert columns[start:stop] == whole[start:stop]
    assert types_of(columns) == [c.type for c in whole]
    assert texts_of(columns) == [c.text for c in whole]
    assert [text_at(columns, i) for i in range(len(sent))] == [c.text for c in whole]
    assert columns.joined(start, stop, "\n") == "\n".join(c.text for c in whole[start:stop])
    with pytest.raises(IndexError):
        columns[len(sent)]


def test_compact_body_of_plain_events_when_parsed_then_texts_are_slices_of_it() -> None:
    # The common body (what JSON.stringify and orjson write) takes the verbatim path:
    # each text is exactly its event's bytes in the body.
    sent = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": 'héllo \u2028 \\ "'}] * 3
    body = orjson.dumps({"events": sent})
    split = split_events(body)
    assert split is not None
    chunks, _, _ = split
    assert [c.text.encode() for c in chunks] == [orjson.dumps(e) for e in sent]
    spaced = b'{"events": [ {"type" : "A", "n": 1.50} , {"type":"B"} ]}'
    chunks = parse_json_batch(spaced, LIMITS).chunks
    assert [c.text for c in chunks] == ['{"type" : "A", "n": 1.50}', '{"type":"B"}']


@pytest.mark.parametrize(
    "number",
    [b"1e999", b"-1E+400", b"1.5e0400", b"[1, 2e309 ]", b"1" * 400 + b".5", b"1" * 320 + b"e0"],
)
def test_number_past_a_double_when_appended_then_refused_as_invalid_json(number: bytes) -> None:
    body = b'{"events":[{"type":"A","x":' + number + b"}]}"
    with pytest.raises(InvalidJson):
        parse_json_batch(body, LIMITS)


@pytest.mark.parametrize(
    "number", [b"1e99", b"1e-999", b"123456789012345678901234567890", b"1" * 400]
)
def test_number_within_range_or_whole_when_appended_then_kept_exactly(number: bytes) -> None:
    body = b'{"events":[{"type":"A","x":' + number + b"}]}"
    (chunk,) = parse_json_batch(body, LIMITS).chunks
    assert same(loads(chunk.text)["x"], loads(number))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b'{"events":[{"type":"A","x":"a\xffb"}]}', InvalidJson),
        (b'{"events":[{"type":"A","x":NaN}]}', InvalidJson),
        (b'{"events":[{"type":"A"}],"extra":1}', InvalidRequest),
        (b'{"events":[{"type":"A"}],"close":null}', InvalidRequest),
        (b'{"events":[{"type":"A"}],"expected_seq":true}', InvalidRequest),
        (b'{"events":[{"type":"A"},{"type":""}]}', InvalidEvent),
        (b'{"events":[{"type":"A"},{"type":1}]}', InvalidEvent),
        (b'{"events":[{"type":"A"},1]}', InvalidEvent),
        (b'{"events":{"type":"A"}}', InvalidRequest),
    ],
)
def test_body_when_malformed_then_refused_whichever_path(body: bytes, error: type) -> None:
    with pytest.raises(error):
        parse_json_batch(body, LIMITS)


def test_lone_surrogate_when_appended_then_kept_as_sent() -> None:
    body = b'{"events":[{"type":"A","delta":"\\ud83d"},{"type":"B","delta":"\\ude00x"}]}'
    chunks = parse_json_batch(body, LIMITS).chunks
    assert [loads(c.text)["delta"] for c in chunks] == ["\ud83d", "\ude00x"]


def test_event_over_the_chunk_limit_when_sent_on_one_line_then_refused_with_its_index() -> None:
    limits = Limits(max_chunk_bytes=100)
    small = {"type": "A", "delta": "x" * 40}
    ok = parse_json_batch(orjson.dumps({"events": [small, small, small]}), limits)
    assert len(ok.chunks) == 3  # the body is over the limit, no event is
    big = {"type": "A", "delta": "x" * 100}
    with pytest.raises(PayloadTooLarge) as refused:
        parse_json_batch(orjson.dumps({"events": [small, big]}), limits)
    assert refused.value.extra["index"] == 1
