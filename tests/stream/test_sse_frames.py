"""The one SSE writer (`agent_replay.stream.sse`): read back as the HTML standard parses an
event stream, and byte for byte as the pinned sse-starlette writes the same fields."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from sse_starlette import ServerSentEvent

from agent_replay.stream import sse
from tests.support.sse import parse

texts = st.text(st.characters(codec="utf-8"), max_size=40)
names = st.text(st.characters(codec="utf-8", exclude_characters="\r\n"), min_size=1, max_size=12)
seqs = st.integers(min_value=0, max_value=2**53)


@given(texts, st.none() | seqs, st.none() | names, st.booleans())
def test_frame_when_read_as_a_browser_does_then_data_id_and_name_come_back(
    data: str, seq: int | None, name: str | None, tight: bool
) -> None:
    parsed = parse(sse.frame(data, id=seq, event=name, tight=tight))
    ((event,),) = [parsed.events]
    # A line break in the data comes back as LF, however it was written.
    assert event.data == data.replace("\r\n", "\n").replace("\r", "\n")
    assert event.event == (name or "message")
    assert event.last_id == ("" if seq is None else str(seq))


def test_frame_when_tight_then_data_lines_without_a_space_unless_one_leads() -> None:
    frame = sse.frame("line1\n  indented", event="data", tight=True)
    assert frame == "event: data\ndata:line1\ndata:   indented\n\n"
    assert [e.data for e in parse(frame).events] == ["line1\n  indented"]


@given(texts, st.none() | seqs, st.none() | names)
def test_frame_when_compared_with_sse_starlette_then_the_same_bytes(
    data: str, seq: int | None, name: str | None
) -> None:
    ours = sse.frame(data, id=seq, event=name).encode()
    theirs = ServerSentEvent(
        data, id=None if seq is None else str(seq), event=name, sep="\n"
    ).encode()
    assert ours == theirs


@given(st.recursive(st.none() | st.booleans() | st.integers() | texts,
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(texts, inner, max_size=3), max_leaves=8),
       st.sampled_from(["\n", "\r\n", "\r", " "]), seqs)  # fmt: skip
def test_json_frame_when_the_text_has_raw_line_breaks_then_one_data_line_and_the_same_value(
    value: object, newline: str, seq: int
) -> None:
    text = json.dumps(value, indent=1).replace("\n", newline)
    frame = sse.json_frame(text, id=seq, event="TEXT_MESSAGE_CONTENT")
    assert sum(line.startswith("data:") for line in frame.split("\n")) == 1
    ((event,),) = [parse(frame).events]
    assert (json.loads(event.data), event.event, event.last_id) == (
        value,
        "TEXT_MESSAGE_CONTENT",
        str(seq),
    )


@given(st.lists(st.tuples(seqs, st.sampled_from(['{"a":1}', '{\n"b":\r\n[2]}', '"x\\ny"']))))
def test_json_frames_when_read_then_each_row_is_an_event_under_its_seq(
    rows: list[tuple[int, str]],
) -> None:
    parsed = parse(sse.json_frames(rows))
    got = [(int(e.last_id), json.loads(e.data)) for e in parsed.events]
    assert got == [(seq, json.loads(text)) for seq, text in rows]


def test_id_only_when_read_then_no_event_and_the_last_id_moves() -> None:
    parsed = parse(sse.json_frame('{"n":1}', id=3) + sse.id_only(9))
    assert ([e.last_id for e in parsed.events], parsed.last_id) == (["3"], "9")
    assert sse.id_only(9).encode() == ServerSentEvent(id="9", sep="\n").encode()


def test_retry_and_comment_when_read_then_hint_and_heartbeat_without_events() -> None:
    parsed = parse(sse.retry(2500) + sse.comment("ping - now\nand then"))
    assert (parsed.events, parsed.retry, parsed.comments) == (
        [],
        [2500],
        ["ping - now", "and then"],
    )
    assert sse.retry(2500).encode() == ServerSentEvent(retry=2500, sep="\n").encode()
    assert (sse.comment("ping - now").encode()
            == ServerSentEvent(comment="ping - now", sep="\n").encode())  # fmt: skip
