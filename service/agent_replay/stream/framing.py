"""Wire encodings of a run's events: SSE and NDJSON, many events per write.

A page of stored events becomes one pre-formatted `bytes` blob, so catch-up
costs one send per page rather than one per event. The stored chunk text is
spliced in as is (never decoded and re-encoded): the log keeps it as the JSON
text replay must send.

    SSE     id: <seq>\\ndata: <chunk>\\n\\n        (no `event:`, one `data:` line)
    NDJSON  {"id":"<seq>","chunk":<chunk>}\\n      (TanStack's durable envelope)
"""

from __future__ import annotations

import enum
import re
from collections.abc import Hashable, Sequence
from typing import Protocol

from agent_replay.log.values import Row as Row  # re-exported: the stream's unit of a page

SSE_MEDIA_TYPE = "text/event-stream"
NDJSON_MEDIA_TYPE = "application/x-ndjson"
_NDJSON_ALIASES = frozenset({NDJSON_MEDIA_TYPE, "application/jsonl", "application/ndjson"})

# Raw CR/LF can only sit in valid JSON text as insignificant whitespace (inside
# strings they must be escaped), so replacing them with spaces keeps the value
# while keeping one event on one `data:` line.
_LINE_BREAKS = re.compile(r"[\r\n]")


class Framer(Protocol):
    """What turns a page of rows into wire bytes for one follower.

    Framers with equal `key`s frame equal rows alike, so a channel encodes a
    buffered page once for all of them; a framer that keeps state between
    pages (its output depends on what it framed before) has `key` None and
    is called once per row, in seq order.
    """

    @property
    def key(self) -> Hashable | None: ...

    def frame(self, rows: Sequence[Row]) -> bytes: ...


class Encoding(enum.Enum):
    SSE = "sse"
    NDJSON = "ndjson"

    @property
    def media_type(self) -> str:
        return SSE_MEDIA_TYPE if self is Encoding.SSE else NDJSON_MEDIA_TYPE

    # An encoding is the plain framer: every event, as stored.
    @property
    def key(self) -> Hashable:
        return self

    def frame(self, rows: Sequence[Row]) -> bytes:
        return encode(rows, self)


def choose_encoding(accept: str | None, format_param: str | None = None) -> Encoding:
    """`?format=` wins (TanStack's `fetchHttpStream` sends no Accept), then Accept, else SSE."""
    if format_param:
        return Encoding.NDJSON if format_param.lower() in ("ndjson", "jsonl") else Encoding.SSE
    for part in (accept or "").split(","):
        media = part.split(";")[0].strip().lower()
        if media == SSE_MEDIA_TYPE:
            return Encoding.SSE
        if media in _NDJSON_ALIASES:
            return Encoding.NDJSON
    return Encoding.SSE


def one_line(text: str) -> str:
    return _LINE_BREAKS.sub(" ", text)


def sse_text(rows: Sequence[Row]) -> str:
    text = "".join([f"id: {seq}\ndata: {chunk}\n\n" for seq, chunk in rows])
    # Three newlines per event exactly when no chunk carries a raw line break:
    # one C-speed count instead of a check per chunk.
    if text.count("\n") != 3 * len(rows) or "\r" in text:
        text = "".join([f"id: {seq}\ndata: {one_line(chunk)}\n\n" for seq, chunk in rows])
    return text


def ndjson_text(rows: Sequence[Row]) -> str:
    text = "".join([f'{{"id":"{seq}","chunk":{chunk}}}\n' for seq, chunk in rows])
    if text.count("\n") != len(rows) or "\r" in text:
        text = "".join([f'{{"id":"{seq}","chunk":{one_line(chunk)}}}\n' for seq, chunk in rows])
    return text


def encode(rows: Sequence[Row], encoding: Encoding) -> bytes:
    text = sse_text(rows) if encoding is Encoding.SSE else ndjson_text(rows)
    return text.encode()


def sse_preamble(retry_ms: int) -> bytes:
    """The reconnect delay hint a browser's EventSource honours (TanStack ignores it)."""
    return f"retry: {retry_ms}\n\n".encode()
