"""The C scan of a large JSON or NDJSON append body (`service/agent_replay/ingest/_scan.c`): built
where the tests run, it reads exactly what msgspec's passes (or the line-by-line path)
read, and a body it vouches for is one the exact parser reads the same way, however the
body was damaged."""

from __future__ import annotations

import json
import os
import re
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.errors import InvalidEvent, InvalidJson, InvalidRequest
from agent_replay.ingest import Limits, _scan, parse_json_batch, parse_ndjson_batch, verbatim
from agent_replay.ingest.verbatim import split_decoded, split_lines, split_scanned
from agent_replay.log.chunks import Chunks, loads, texts_of, types_of
from agent_replay.log.rows import BATCH_MIN
from tests.ingest.jsonvalues import same

LIMITS = Limits()


def test_scan_when_the_service_is_installed_then_it_is_built() -> None:
    # `pip install` compiles it; a checkout whose tests run without it would test
    # only the slower path and ship it silently. (CI also runs the suite with
    # AGENT_REPLAY_NO_EXTENSIONS=1: built, but bodies read as without it.)
    assert verbatim.BUILT
    assert verbatim.SCAN is (os.environ.get("AGENT_REPLAY_NO_EXTENSIONS") != "1")


def spans_of(*bounds: tuple[int, int]) -> bytes:
    return array("q", [at for pair in bounds for at in pair]).tobytes()


def test_scan_texts_when_a_span_holds_utf8_then_str_decodes_it() -> None:
    body = b'["\xc3\xa9","a"]'
    texts = _scan.texts(body, spans_of((1, 5), (6, 9)))
    assert texts == ['"é"', '"a"']
    assert [t.isascii() for t in texts] == [False, True]
    assert _scan.joined(body, spans_of((1, 5), (6, 9)), 0, 2, b",") == '"é","a"'


@pytest.mark.parametrize("body", [b'"\xff"', b'"\xc3"', b'"\xed\xa0\x80"'])
def test_scan_texts_when_a_span_is_no_utf8_then_refused(body: bytes) -> None:
    # Not a str whose bytes disagree with its kind: str's own decoder refuses them.
    with pytest.raises(UnicodeDecodeError):
        _scan.texts(body, spans_of((0, len(body))))
    with pytest.raises(UnicodeDecodeError):
        _scan.joined(body, spans_of((0, len(body))), 0, 1, b"")


@pytest.mark.parametrize(("start", "stop"), [(0, -1), (-1, 1), (2, 1), (0, 3)])
def test_scan_joined_when_start_or_stop_outside_the_events_then_index_error(
    start: int, stop: int
) -> None:
    with pytest.raises(IndexError):
        _scan.joined(b'{"a":1}{"b":2}', spans_of((0, 7), (7, 14)), start, stop, b"\n")


@pytest.mark.parametrize("spans", [spans_of((0, 8)), spans_of((3, 2)), b"\x00" * 15])
def test_scan_texts_when_spans_outside_the_body_then_value_error(spans: bytes) -> None:
    with pytest.raises(ValueError, match="spans out of range"):
        _scan.texts(b'{"a":1}', spans)


# Any JSON value, numbers of every size the general path keeps included.
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**40), 10**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)
# Types the scan takes: printable ASCII written without escapes.
plain_types = st.sampled_from(["TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "RUN_FINISHED"]) | st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'),
    min_size=1,
    max_size=8,
)
events = st.builds(
    lambda kind, rest: {**rest, "type": kind},
    plain_types,
    st.dictionaries(st.sampled_from(["delta", "messageId", "toolCallId", "args", "n"]), values),
)


def written(envelope: dict[str, Any], style: str) -> bytes:
    if style == "compact":  # as JSON.stringify writes it
        compact = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
        return compact.encode("utf-8", "surrogatepass")
    return json.dumps(envelope).encode()  # ", " and ": ", non-ASCII escaped


def envelope_of(sent: list[dict[str, Any]], expected: Any, close: Any) -> dict[str, Any]:
    envelope: dict[str, Any] = {"events": sent}
    if expected is not None:
        envelope["expected_seq"] = expected
    if close is not None:
        envelope["close"] = close
    return envelope


def as_read(split: tuple[Any, Any, Any]) -> tuple[list[str], list[str], Any, Any]:
    chunks, expected, close = split
    return types_of(chunks), texts_of(chunks), expected, close


@settings(max_examples=300, deadline=None)
@given(
    st.lists(events, min_size=BATCH_MIN, max_size=30),
    st.sampled_from(["compact", "spaced"]),
    st.none() | st.integers(1, 10**6) | st.text(max_size=3),
    st.none() | st.booleans() | st.just(0),
)
def test_body_when_msgspec_reads_it_then_the_scan_reads_the_same(
    sent: list[dict[str, Any]], style: str, expected: Any, close: Any
) -> None:
    body = written(envelope_of(sent, expected, close), style)
    decoded = split_decoded(body)
    scanned = split_scanned(body)
    if decoded is None:
        # msgspec's passes decline a number near a double's range anywhere in the body,
        # strings included; the scan only where it is a number. What it takes then is
        # what the exact parser reads.
        if scanned is not None:
            agrees_with_the_exact_parser(body, scanned)
        return
    assert scanned is not None
    assert type(scanned[0]) is Chunks
    assert as_read(scanned) == as_read(decoded)
    chunks = scanned[0]
    assert list(chunks) == list(decoded[0])
    assert chunks.joined(1, len(sent) - 1, "\n") == "\n".join(texts_of(decoded[0])[1:-1])


def agrees_with_the_exact_parser(body: bytes, split: tuple[Any, Any, Any]) -> None:
    """What the scan gave is what the exact parser reads in `body`."""
    envelope = loads(body)  # raises (fails the test) on a body that is no JSON
    assert isinstance(envelope, dict)
    assert set(envelope) <= {"events", "expected_seq", "close"}
    kinds, texts, expected, close = as_read(split)
    sent = envelope["events"]
    assert isinstance(sent, list) and len(sent) == len(kinds) == len(texts)
    for kind, text, event in zip(kinds, texts, sent, strict=True):
        assert isinstance(event, dict) and event["type"] == kind
        assert kind and kind.isascii() and "\x00" not in kind
        assert "\n" not in text and "\r" not in text
        assert same(loads(text), event)
    assert same(expected, envelope.get("expected_seq"))
    assert same(close, envelope.get("close", False))


# What a damaged body may hold where it was damaged: JSON's punctuation, escapes,
# digits and exponents, control and high bytes, invalid UTF-8.
damage = st.sampled_from(
    [
        b'"', b"\\", b"{", b"}", b"[", b"]", b":", b",", b" ", b"\t", b"\n", b"\r", b"\x00",
        b"\x1f", b"0", b"9", b"-", b"+", b".", b"e", b"E", b"e999", b"1" * 210, b"u", b"\\u",
        b"\\ud800", b"t", b"true", b"nul", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", b"\xff",
        b'"type"', b'"type":"A"', b'"events"', b'"close":', b"x",
    ]
)  # fmt: skip
# What a string may hold (escapes included): damage there leaves JSON, which the scan
# must read as the exact parser does (or decline), brackets and quotes in it included.
in_string = st.sampled_from(
    [
        b"{", b"}", b"[", b"]", b":", b",", b" ", b"\t", b"0", b"e999", b"1" * 210,
        b"\\u0041", b"\\ud800", b"\\n", b'\\"', b"\\\\", b"\xc3\xa9", b"true", b"x",
    ]
)  # fmt: skip
# An edit: where (a fraction of the body, or of its events' strings), a cut of up to 3
# bytes, and what is written there; inside a string (no cut) or anywhere. Bodies edited
# only inside strings make the scan accept damaged bodies, not only decline them.
inside = st.tuples(st.floats(0, 1), st.just(0), in_string, st.just(True))
anywhere = st.tuples(st.floats(0, 1), st.integers(0, 3), damage, st.just(False))
edits = st.lists(inside, min_size=1, max_size=3) | st.lists(
    anywhere | inside, min_size=1, max_size=3
)
STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def damaged(
    body: bytes, changes: list[tuple[float, int, bytes, bool]], envelope: bool = False
) -> bytes:
    """`body` edited; `envelope`: its first and last strings (the keys "events" and
    "expected_seq") are left alone."""
    for where, cut, text, in_a_string in changes:
        strings = [found.span() for found in STRING.finditer(body)]
        if envelope:
            strings = strings[1:-1]
        if in_a_string and strings:
            start, end = strings[min(len(strings) - 1, int(where * len(strings)))]
            at = start + 1 + int(where * (end - start - 2))
            body = body[:at] + text + body[at:]
        else:
            at = int(where * len(body))
            body = body[:at] + text + body[at + cut :]
    return body


@pytest.mark.slow
def test_body_when_damaged_then_the_scan_declines_or_reads_what_the_exact_parser_reads() -> None:
    accepted = 0

    @settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(
        st.lists(events, min_size=BATCH_MIN, max_size=8),
        st.sampled_from(["compact", "spaced"]),
        edits,
    )
    def check(
        sent: list[dict[str, Any]], style: str, changes: list[tuple[float, int, bytes, bool]]
    ) -> None:
        nonlocal accepted
        body = damaged(written({"events": sent, "expected_seq": 3}, style), changes, True)
        scanned = split_scanned(body)
        if scanned is not None:
            agrees_with_the_exact_parser(body, scanned)
            accepted += 1

    check()
    # The bodies must have reached the scan's accepting paths, not only its declines
    # (about a fifth of them do).
    assert accepted >= 100


def four(event: bytes) -> bytes:
    """A body of `event` (raw JSON) after three plain events."""
    return b'{"events":[' + b'{"type":"A"},' * 3 + event + b"]}"


@pytest.mark.parametrize(
    "body",
    [
        four(b'{"typ\\u0065":"B"}'),  # the type's key written with an escape
        four(b'{"type":"B\\u0041"}'),  # the type written with one
        four(b'{"type":"\xc3\xa9"}'),  # not ASCII
        four(b'{"type":"B","type":"C"}'),  # twice: the general path keeps the last
        b'{"events":[' + b",".join(b'{"type":"T%d"}' % i for i in range(40)) + b"]}",
        b'{"close":false,"events":[' + b'{"type":"A"},' * 3 + b'{"type":"B"}]}',
        four(b'{"type":"B"}')[:-1] + b',"events":[]}',  # twice: the last is what counts
    ],
)
def test_body_when_the_scan_declines_a_valid_one_then_it_is_stored_as_sent(body: bytes) -> None:
    chunks = parse_json_batch(body, LIMITS).chunks
    events = loads(body)["events"]
    assert [c.type for c in chunks] == [e["type"] for e in events]
    assert all(same(loads(c.text), e) for c, e in zip(chunks, events, strict=True))


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (four(b'{"type":"B","x":1e400}'), InvalidJson),
        (four(b'{"type":"B","x":[' + b"1" * 320 + b".5]}"), InvalidJson),
        (four(b'{"type":"B","x":"a\x01b"}'), InvalidJson),
        (four(b'{"type":"B","x":"a\xffb"}'), InvalidJson),
        (four(b'{"type":"B","x":"\xed\xa0\x80"}'), InvalidJson),
        (four(b'{"type":"B","x":01}'), InvalidJson),
        (four(b'{"type":"B","x":[1,]}'), InvalidJson),
        (four(b'{"type":"B","x":"\\x"}'), InvalidJson),
        (four(b'{"type":"B","x":tru}'), InvalidJson),
        (four(b'{"type":"B"}') + b"x", InvalidJson),
        (four(b'{"type":"B"}')[:-1], InvalidJson),
        (four(b'{"type":"B"}')[:-1] + b',"extra":1}', InvalidRequest),
        (four(b'{"type":""}'), InvalidEvent),
        (four(b'{"type":null}'), InvalidEvent),
        (four(b'{"x":"B"}'), InvalidEvent),
        (four(b"[]"), InvalidEvent),
    ],
)
def test_body_when_the_scan_declines_a_bad_one_then_refused(body: bytes, error: type) -> None:
    assert split_scanned(body) is None
    with pytest.raises(error):
        parse_json_batch(body, LIMITS)


def test_nesting_deeper_than_the_scan_goes_when_sent_then_read_the_general_way() -> None:
    deep = b"[" * 300 + b"]" * 300
    body = four(b'{"type":"B","x":' + deep + b"}")
    assert split_scanned(body) is None
    (*_, last) = parse_json_batch(body, LIMITS).chunks
    assert same(loads(last.text), loads(b'{"type":"B","x":' + deep + b"}"))


def test_body_with_spaces_and_tabs_when_scanned_then_texts_are_the_events_as_sent() -> None:
    body = b'{ "events" :\t[ {"type" : "A", "n": 1.50} , {"type":"B"},{"type":"C"} ,{"type":"D"}]}'
    scanned = split_scanned(body)
    assert scanned is not None
    assert texts_of(scanned[0]) == [
        '{"type" : "A", "n": 1.50}',
        '{"type":"B"}',
        '{"type":"C"}',
        '{"type":"D"}',
    ]
    assert scanned[1:] == (None, False)


def test_body_with_fewer_events_than_a_batch_row_when_scanned_then_left_to_msgspec() -> None:
    body = b'{"events":[' + b'{"type":"A"},' * (BATCH_MIN - 2) + b'{"type":"B"}]}'
    assert split_scanned(body) is None
    assert split_decoded(body) is not None


@pytest.mark.parametrize("count", [BATCH_MIN, 255, 256, 257, 1000])
def test_large_body_when_scanned_then_every_row_slice_joins_its_events(count: int) -> None:
    sent = [{"type": "T", "delta": f"é{i}", "messageId": f"m{i}"} for i in range(count)]
    body = json.dumps({"events": sent}, ensure_ascii=False).encode()
    scanned = split_scanned(body)
    assert scanned is not None
    chunks = scanned[0]
    texts = [json.dumps(e, ensure_ascii=False) for e in sent]
    assert texts_of(chunks) == texts
    assert chunks.joined(0, count, "\n") == "\n".join(texts)
    assert chunks.joined(count - 1, count, "\n") == texts[-1]
    assert chunks.joined(3, 3, "\n") == ""
    assert [c.message_id for c in chunks] == [e["messageId"] for e in sent]


# NDJSON bodies: an event per line, with blank lines and spaces where a producer may
# leave them.
gaps = st.sampled_from([b"", b" ", b"\t", b"  \t"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(events, gaps, gaps, st.booleans()), min_size=BATCH_MIN, max_size=30),
    st.booleans(),
)
def test_ndjson_body_when_scanned_then_it_reads_what_the_line_by_line_path_reads(
    lines: list[tuple[dict[str, Any], bytes, bytes, bool]], spaced: bool
) -> None:
    body = b""
    for event, before, after, blank in lines:
        text = (
            json.dumps(event).encode()
            if spaced
            else json.dumps(event, separators=(",", ":"), ensure_ascii=False).encode(
                "utf-8", "surrogatepass"
            )
        )
        body += before + text + after + b"\n" + (b" \n" if blank else b"")
    try:
        by_line = parse_ndjson_batch(body, LIMITS, columns_from=None).chunks
    except InvalidJson:  # a number past a double's range, a lone surrogate written raw
        assert split_lines(body) is None
        return
    scanned = split_lines(body)
    if scanned is None:
        # Declined only for a number whose exponent might be past a double's (a float
        # such as 1e+300 written out): a body the scan does not vouch for.
        assert re.search(rb"[0-9][eE][-+]?[0-9]{3}", body)
        return
    assert types_of(scanned) == [c.type for c in by_line]
    assert texts_of(scanned) == [c.text for c in by_line]
    assert list(scanned) == list(by_line)


@pytest.mark.slow
def test_ndjson_body_when_damaged_then_the_scan_declines_or_reads_what_each_line_holds() -> None:
    accepted = 0

    @settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(events, min_size=BATCH_MIN, max_size=8), edits)
    def check(sent: list[dict[str, Any]], changes: list[tuple[float, int, bytes, bool]]) -> None:
        nonlocal accepted
        body = damaged(b"\n".join(json.dumps(e).encode() for e in sent) + b"\n", changes)
        scanned = split_lines(body)
        if scanned is None:
            return
        lines = [line for line in body.split(b"\n") if line.strip(b" \t")]
        assert len(lines) == len(scanned)
        for line, chunk in zip(lines, scanned, strict=True):
            event = loads(line)  # raises (fails the test) on a line that is no JSON
            assert isinstance(event, dict) and event["type"] == chunk.type
            assert chunk.text == line.strip(b" \t").decode()
        accepted += 1

    check()
    # As for JSON bodies: the accepting paths were reached, not only the declines.
    assert accepted >= 100


@pytest.mark.parametrize(
    "body",
    [
        b'{"type":"A"}\n' * (BATCH_MIN - 1),  # fewer events than a batch row
        b'{"type":"A"}\r\n' * BATCH_MIN,  # CRLF: the line-by-line path re-encodes
        b'{"type":"A"}\n' * BATCH_MIN + b'{"type":"B"} {"type":"C"}\n',  # two on a line
        b'{"type":"A"}\n' * BATCH_MIN + b'\x0c{"type":"B"}\n',  # other whitespace
        b'{"type":"A"}\n' * BATCH_MIN + b'{"type":"B","x":1e400}\n',
        b'{"type":"A"}\n' * BATCH_MIN + b"[1]\n",
    ],
)
def test_ndjson_body_when_the_scan_declines_then_read_line_by_line(body: bytes) -> None:
    assert split_lines(body) is None
    try:
        chunks = parse_ndjson_batch(body, LIMITS).chunks
    except (InvalidJson, InvalidEvent) as refused:
        assert refused.extra["line"] == BATCH_MIN + 1
        return
    values = [loads(line.strip()) for line in body.split(b"\n") if line.strip()]
    assert [c.type for c in chunks] == [v["type"] for v in values]
    assert all(same(loads(c.text), v) for c, v in zip(chunks, values, strict=True))
