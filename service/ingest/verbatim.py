"""The common JSON append body, read without building its events in Python.

`{"events": [...]}` with each event kept as the producer sent it (a slice of
the body) instead of parsed to objects and encoded again: two passes of
msgspec's C decoder, one taking each event as raw text and one reading only its
`type`, `messageId` and `toolCallId`. For a large batch most of an append's
CPU was the parse and the encode. From `BATCH_MIN` events (what the log stores
in batch rows, which keep no ids) the second pass reads the types only, and the
chunks stay columns (`service.log.chunks.Chunks`): the texts are decoded when
something asks for them, most only joined into a batch row.

A slice is stored only where it means exactly what the general path would
store; anything else (a raw CR or LF anywhere in the body, invalid UTF-8, a
lone surrogate, an ID that is no ASCII string, a number that might overflow a
double, a malformed body) gets None here and goes the general way, which
either stores the event re-encoded or names what is wrong. A slice may keep the
sender's spaces and escapes: the same JSON value, and what an NDJSON line keeps
too.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec

from service.log.chunks import Chunks, IdColumns, StoredChunk, plain, stored_id
from service.log.rows import BATCH_MIN


class _Head(msgspec.Struct, gc=False):
    type: str
    messageId: str | None = None
    toolCallId: str | None = None


class _Heads(msgspec.Struct, gc=False):
    events: list[_Head]


class _Type(msgspec.Struct, gc=False):
    type: str


class _Types(msgspec.Struct, gc=False):
    events: list[_Type]


class _Ids(msgspec.Struct, gc=False):
    messageId: Any = None
    toolCallId: Any = None


class _AllIds(msgspec.Struct, gc=False):
    events: list[_Ids]


class _Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    events: list[msgspec.Raw]
    expected_seq: Any = None
    close: Any = False


_HEADS = msgspec.json.Decoder(_Heads)
_TYPES = msgspec.json.Decoder(_Types)
_ALL_IDS = msgspec.json.Decoder(_AllIds)
_ENVELOPE = msgspec.json.Decoder(_Envelope)
_TYPE = attrgetter("type")
_MESSAGE_ID = attrgetter("messageId")
_TOOL_CALL_ID = attrgetter("toolCallId")
_new_chunk = tuple.__new__

# A number may be past a double's range (which JSON allows and the general path
# refuses) only with an exponent of three digits or more, or with hundreds of
# digits (a mantissa under 200 digits needs an exponent over 99). Mapped so:
# digits and signs to "0", "e" and "E" to "e", what may end a number ("," "}" "]"
# and spaces) to ":", the rest to "x"; such a number then reads "e000...:" or "0"
# 200 times. Two C passes, no loop in Python; a false positive (in a string) costs
# only speed.
_NUMBERISH = bytes.maketrans(
    bytes(range(256)),
    bytes(
        0x30
        if 0x30 <= b <= 0x39 or b in b"+-"
        else 0x65
        if b in b"eE"
        else 0x3A
        if b in b",}] \t"
        else 0x78
        for b in range(256)
    ),
)
_BIG_EXPONENT = re.compile(rb"e000+:")
_LONG_NUMBER = b"0" * 200


def _may_overflow(body: bytes) -> bool:
    mapped = body.translate(_NUMBERISH)
    return _LONG_NUMBER in mapped or _BIG_EXPONENT.search(mapped) is not None


def split_events(
    body: bytes, columns_from: int | None = BATCH_MIN
) -> tuple[Sequence[StoredChunk], Any, Any] | None:
    """`(chunks, expected_seq, close)` of a plain `{"events": [...]}` body, each chunk's
    text its slice of the body (`expected_seq` and `close` as sent, unchecked); None
    for any other body (see the module's doc). From `columns_from` events (the log's
    batch rows' threshold; None: a log storing a row per event) the chunks are
    `Chunks`."""
    if b"\n" in body or b"\r" in body:
        return None
    try:
        envelope = _ENVELOPE.decode(body)
        raws = envelope.events
        columns = columns_from is not None and len(raws) >= columns_from
        chunks = _columns(body, raws) if columns else _tuples(body, raws)
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    if chunks is None or _may_overflow(body):
        return None
    return chunks, envelope.expected_seq, envelope.close


def _columns(body: bytes, raws: list[msgspec.Raw]) -> Chunks | None:
    """A large batch's chunks as `Chunks`: only the types read, no text decoded yet
    (most will only be joined into batch rows), the ids not read at all."""
    kinds = list(map(_TYPE, _TYPES.decode(body).events))
    if "" in kinds or not plain(kinds):
        return None
    # Decoded whole, the body is valid UTF-8 exactly when each slice is (a slice
    # ends at ASCII punctuation), and cheaper to check so once.
    if not body.isascii():
        body.decode()
    return Chunks(kinds, raws, lambda: _ids(body))


def _ids(body: bytes) -> IdColumns | None:
    """Every event's ids as `stored` keeps them, in one pass (for rows that keep them:
    a type with a newline, or a log configured to store a row per event); None if
    msgspec cannot tell (each chunk's text is then parsed by the exact parser)."""
    try:
        heads = _ALL_IDS.decode(body).events
    except (msgspec.DecodeError, RecursionError):
        return None
    return (
        list(map(stored_id, map(_MESSAGE_ID, heads))),
        list(map(stored_id, map(_TOOL_CALL_ID, heads))),
    )


def _tuples(body: bytes, raws: list[msgspec.Raw]) -> list[StoredChunk] | None:
    heads = _HEADS.decode(body).events
    texts = list(map(str, raws, repeat("utf-8")))
    kinds = list(map(_TYPE, heads))
    message_ids = list(map(_MESSAGE_ID, heads))
    tool_call_ids = list(map(_TOOL_CALL_ID, heads))
    # The ids looked at joined: cheaper than a search of the whole body for an
    # escape that could make one of them non-ASCII or NUL.
    if "" in kinds or not (plain(kinds) and plain(message_ids) and plain(tool_call_ids)):
        return None
    columns = zip(kinds, texts, message_ids, tool_call_ids, strict=True)
    # Tuples made directly: StoredChunk's own constructor is a Python call.
    return list(map(_new_chunk, repeat(StoredChunk), columns))
