"""The pure encodings: offsets order like seqs, bodies round-trip, SSE frames parse back."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_replay.durable import bodies, sse
from agent_replay.durable.cursor import current_interval, response_cursor
from agent_replay.durable.offsets import MAX_OFFSET_SEQ, NOW, format_offset, parse_offset
from agent_replay.errors import EmptyArray, InvalidJson, InvalidOffset
from agent_replay.log.chunks import dumps, loads
from tests.support.sse import parse

seqs = st.integers(min_value=0, max_value=MAX_OFFSET_SEQ)


@given(seqs, seqs)
def test_offsets_when_compared_as_strings_then_ordered_as_their_seqs(a: int, b: int) -> None:
    assert (format_offset(a) < format_offset(b)) == (a < b)
    assert parse_offset(format_offset(a)) == a


@pytest.mark.parametrize("text", ["", "0", "abc", "1_2_3", "-2", "0000000000000000_", "now "])
def test_parse_offset_when_not_an_offset_then_invalid_offset(text: str) -> None:
    with pytest.raises(InvalidOffset):
        parse_offset(text)


def test_parse_offset_when_sentinel_then_start_or_tail() -> None:
    assert (parse_offset("-1"), parse_offset("now")) == (0, NOW)
    assert format_offset(0) not in ("-1", "now")


@given(st.binary(max_size=300))
def test_bytes_when_stored_as_an_event_then_read_back_exactly(data: bytes) -> None:
    chunk = bodies.bytes_chunk(data)
    assert loads(chunk.text)["type"] == "CUSTOM"
    assert bodies.chunk_bytes(chunk.text) == data


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


@given(st.lists(json_values, min_size=1, max_size=5))
def test_json_body_when_an_array_then_flattened_one_level_and_read_back(
    items: list[object],
) -> None:
    chunks = bodies.json_messages(dumps(items).encode(), allow_empty=False, max_messages=100)
    assert len(chunks) == len(items)
    body = bodies.body_of([(i, c.text) for i, c in enumerate(chunks, 1)], True)
    assert loads(body) == items


def test_json_body_when_empty_array_then_refused_on_append_and_accepted_on_create() -> None:
    with pytest.raises(EmptyArray):
        bodies.json_messages(b"[]", allow_empty=False, max_messages=10)
    assert bodies.json_messages(b"[]", allow_empty=True, max_messages=10) == []
    with pytest.raises(InvalidJson):
        bodies.json_messages(b"{nope", allow_empty=True, max_messages=10)


def test_json_message_when_ag_ui_event_then_typed_like_any_chunk() -> None:
    (chunk,) = bodies.json_messages(
        b'{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f"}',
        allow_empty=False,
        max_messages=1,
    )
    assert (chunk.type, chunk.tool_call_id) == ("TOOL_CALL_START", "c1")
    (plain,) = bodies.json_messages(b"[[1,2]]", allow_empty=False, max_messages=1)
    assert (plain.type, plain.text) == ("", "[1,2]")


@given(st.text(alphabet=st.characters(blacklist_characters="\r"), max_size=50) | st.just(" a\n b"))
def test_sse_data_event_when_parsed_as_sse_then_payload_back(payload: str) -> None:
    # Read as the Durable Streams client reads it: one space after "data:" is dropped.
    (event,) = parse(sse.data_event(payload)).events
    assert (event.event, event.data) == ("data", payload)


def test_control_event_when_closed_then_no_cursor_and_up_to_date() -> None:
    frame = sse.control_event("0000000000000003_0000000000000000", cursor="9", up_to_date=False,
                              closed=True)  # fmt: skip
    (event,) = parse(frame).events
    assert event.event == "control"
    control = loads(event.data)
    assert control == {
        "streamNextOffset": "0000000000000003_0000000000000000",
        "streamClosed": True,
        "upToDate": True,
    }
    assert base64.b64decode(sse.base64_payload(b"\x00\xff")) == b"\x00\xff"


@given(st.integers(min_value=0, max_value=10**6))
def test_cursor_when_client_at_or_past_current_interval_then_strictly_greater(ahead: int) -> None:
    now = 1_800_000_000.0
    current = current_interval(now)
    client = str(current + ahead)
    assert int(response_cursor(client, now)) > int(client)
    assert response_cursor(str(current - 1), now) == str(current)
    assert response_cursor(None, now) == str(current)
