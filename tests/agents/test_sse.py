"""The upstream SSE/NDJSON readers over raw reads cut at every possible byte."""

from __future__ import annotations

import pytest

from agent_replay.agents.sse import NdjsonParser, Parser, SseParser

SSE = (
    b": keepalive\r\n\r\n"
    b'id: 1\r\nevent: message\r\ndata: {"type":"A"}\r\n\r\n'
    b'data: {"type":\r\ndata:"B"}\n\n'
    b"retry: 10\n\n"
    b'data: {"type":"C","s":"\xc3\xa9 \\ud83d"}\r\r'
    b'data:{"type":"E"}\n\n'
    b'data: {"type":"D"}'
)
EXPECTED = [
    '{"type":"A"}', '{"type":\n"B"}', '{"type":"C","s":"é \\ud83d"}', '{"type":"E"}', '{"type":"D"}'
]  # fmt: skip


def _events(parser: Parser, data: bytes, cut: int) -> list[str]:
    """Every event `parser` gives for `data` fed in reads of `cut` bytes, then its end."""
    events: list[str] = []
    for start in range(0, len(data), cut):
        events += parser.feed(data[start : start + cut])
    return events + parser.end()


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 1000])
def test_sse_when_reads_cut_anywhere_then_same_events_in_order(cut: int) -> None:
    assert _events(SseParser(), SSE, cut) == EXPECTED


@pytest.mark.parametrize("cut", [1, 5, 1000])
def test_ndjson_when_reads_cut_anywhere_then_one_event_per_line(cut: int) -> None:
    data = b'{"type":"A"}\n\n  {"type":"B"}\r\n{"type":"C"}'
    expected = ['{"type":"A"}', '{"type":"B"}', '{"type":"C"}']
    assert _events(NdjsonParser(), data, cut) == expected
