"""The upstream SSE/NDJSON readers over raw reads cut at every possible byte."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_replay.agents.sse import ndjson_batches, sse_batches

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


async def _reads(data: bytes, cut: int) -> AsyncIterator[bytes]:
    for start in range(0, len(data), cut):
        yield data[start : start + cut]


@pytest.mark.parametrize("cut", [1, 2, 3, 7, 1000])
async def test_sse_when_reads_cut_anywhere_then_same_events_in_order(cut: int) -> None:
    events = [text async for batch in sse_batches(_reads(SSE, cut)) for text in batch]
    assert events == EXPECTED


@pytest.mark.parametrize("cut", [1, 5, 1000])
async def test_ndjson_when_reads_cut_anywhere_then_one_event_per_line(cut: int) -> None:
    data = b'{"type":"A"}\n\n  {"type":"B"}\r\n{"type":"C"}'
    events = [text async for batch in ndjson_batches(_reads(data, cut)) for text in batch]
    assert events == ['{"type":"A"}', '{"type":"B"}', '{"type":"C"}']
