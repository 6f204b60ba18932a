"""The common JSON append body, read without building its events in Python.

`{"events": [...]}` with each event kept as the producer sent it (a slice of
the body) instead of parsed to objects and encoded again: two passes of
msgspec's C decoder, one taking each event as raw text and one reading only its
`type`, `messageId` and `toolCallId`. For a large batch most of an append's
CPU was the parse and the encode.

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
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec

from service.log.chunks import StoredChunk, plain


class _Head(msgspec.Struct, gc=False):
    type: str
    messageId: str | None = None
    toolCallId: str | None = None


class _Heads(msgspec.Struct, gc=False):
    events: list[_Head]


class _Envelope(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    events: list[msgspec.Raw]
    expected_seq: Any = None
    close: Any = False


_HEADS = msgspec.json.Decoder(_Heads)
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


def split_events(body: bytes) -> tuple[list[StoredChunk], Any, Any] | None:
    """`(chunks, expected_seq, close)` of a plain `{"events": [...]}` body, each chunk's
    text its slice of the body (`expected_seq` and `close` as sent, unchecked); None
    for any other body (see the module's doc)."""
    if b"\n" in body or b"\r" in body:
        return None
    try:
        envelope = _ENVELOPE.decode(body)
        heads = _HEADS.decode(body).events
        texts = list(map(str, envelope.events, repeat("utf-8")))
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        return None
    kinds = list(map(_TYPE, heads))
    message_ids = list(map(_MESSAGE_ID, heads))
    tool_call_ids = list(map(_TOOL_CALL_ID, heads))
    # The ids looked at joined: cheaper than a search of the whole body for an
    # escape that could make one of them non-ASCII or NUL.
    if (
        "" in kinds
        or not (plain(kinds) and plain(message_ids) and plain(tool_call_ids))
        or _may_overflow(body)
    ):
        return None
    columns = zip(kinds, texts, message_ids, tool_call_ids, strict=True)
    # Tuples made directly: StoredChunk's own constructor is a Python call.
    chunks = list(map(_new_chunk, repeat(StoredChunk), columns))
    return chunks, envelope.expected_seq, envelope.close
