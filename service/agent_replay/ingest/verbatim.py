"""The common JSON append body, read without building its events in Python.

`{"events": [...]}` with each event kept as the producer sent it (a slice of
the body) instead of parsed to objects and encoded again. From `BATCH_MIN`
events (what the log stores in batch rows, which keep no ids) the chunks stay
columns (`agent_replay.log.chunks.Chunks`): their types, and texts decoded when
something asks for them, most only joined into a batch row.

Such a body is read by one pass of our own C scan (`_scan.c`: the events'
bounds and types, every number's range, strict JSON) where it was built (`pip
install` compiles it; a machine without a compiler installs without it). What
it does not vouch for, and every body where it is missing, takes two passes of
msgspec's C decoder, one taking each event as raw text and one reading only its
`type` (and below `BATCH_MIN` its `messageId` and `toolCallId`), plus a search
for numbers past a double's range. The same scan reads a large NDJSON body
(`split_lines`); without it, msgspec reads each line for its type. Either way
msgspec costs the server far more CPU per event of a large body than the scan
(docs/benchmarks.md, "Body reading", has the figures).

A slice is stored only where it means exactly what the general path would
store; anything else (a raw CR or LF anywhere in the body, invalid UTF-8, a
lone surrogate, an ID that is no ASCII string, a number that might overflow a
double, a malformed body) gets None here and goes the general way, which
either stores the event re-encoded or names what is wrong. A slice may keep the
sender's spaces and escapes: the same JSON value, and what an NDJSON line keeps
too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Any

import msgspec

from agent_replay.log.chunks import Chunks, IdColumns, plain, stored_id
from agent_replay.log.rows import BATCH_MIN
from agent_replay.log.values import StoredChunk

try:
    from agent_replay.ingest import _scan
except ImportError:  # not compiled here: msgspec's passes read every body
    BUILT = False
else:
    BUILT = True
# Whether bodies are read by the scan: AGENT_REPLAY_NO_EXTENSIONS=1 makes a built install
# read them as one without a compiler does (what CI checks the suite passes both ways).
SCAN = BUILT and os.environ.get("AGENT_REPLAY_NO_EXTENSIONS") != "1"


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
# signs dropped (an exponent's sign is no digit of it), digits to "0", "e" and "E"
# to "e", what may end a number ("," "}" "]" and spaces) to ":", the rest to "x";
# such a number then reads "e000...:" or "0" 200 times. Two C passes, no loop in
# Python; a false positive (in a string) costs only speed.
_NUMBERISH = bytes.maketrans(
    bytes(range(256)),
    bytes(
        0x30 if 0x30 <= b <= 0x39 else 0x65 if b in b"eE" else 0x3A if b in b",}] \t" else 0x78
        for b in range(256)
    ),
)
_BIG_EXPONENT = re.compile(rb"e000+:")
_LONG_NUMBER = b"0" * 200


def _may_overflow(body: bytes) -> bool:
    mapped = body.translate(_NUMBERISH, b"+-")
    return _LONG_NUMBER in mapped or _BIG_EXPONENT.search(mapped) is not None


def split_events(
    body: bytes, columns_from: int | None = BATCH_MIN
) -> tuple[Sequence[StoredChunk], Any, Any] | None:
    """`(chunks, expected_seq, close)` of a plain `{"events": [...]}` body, each chunk's
    text its slice of the body (`expected_seq` and `close` as sent, unchecked); None
    for any other body (see the module's doc). From `columns_from` events (the log's
    batch rows' threshold; None: a log storing a row per event) the chunks are
    `Chunks`."""
    if columns_from is not None and SCAN:
        found = split_scanned(body, columns_from)
        if found is not None:
            return found
    return split_decoded(body, columns_from)


def split_decoded(
    body: bytes, columns_from: int | None = BATCH_MIN
) -> tuple[Sequence[StoredChunk], Any, Any] | None:
    """`split_events` by msgspec's passes alone."""
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


def split_scanned(body: bytes, columns_from: int = BATCH_MIN) -> tuple[Chunks, Any, Any] | None:
    """`split_events` by the C scan alone, for a body of `columns_from` events or more
    (None for a smaller one, for one the scan does not vouch for, and where it was not
    built)."""
    if not BUILT:
        return None
    found = _scan.scan(body)
    chunks = _chunks(body, found, columns_from, lambda: _ids(body))
    if chunks is None or found is None:
        return None
    return chunks, _value(body, found[2], None), _value(body, found[3], False)


def split_lines(body: bytes, columns_from: int | None = BATCH_MIN) -> Chunks | None:
    """An NDJSON body's chunks (an event per line, blank lines skipped, each text its
    line without the spaces around it) as `Chunks`, by the C scan (where it was not
    built, by msgspec line by line), for a body of `columns_from` events or more; None
    for any other (the caller reads it line by line, which names what is wrong)."""
    if columns_from is None:
        return None
    if not SCAN:
        return _lines_decoded(body, columns_from)
    # The ids, where a row keeps them, are read from each text (rare: batch rows don't).
    return _chunks(body, _scan.scan_lines(body), columns_from, None)


_LINE = msgspec.json.Decoder(_Type)


def _lines_decoded(body: bytes, columns_from: int) -> Chunks | None:
    """`split_lines` by msgspec: each line (without the spaces and tabs around it, as the
    scan reads it) decoded alone for its type, which checks it is one JSON object."""
    if b"\r" in body:
        return None
    lines = list(filter(None, map(bytes.strip, body.split(b"\n"), repeat(b" \t"))))
    if len(lines) < columns_from:
        return None
    try:
        kinds = list(map(_TYPE, map(_LINE.decode, lines)))
    except (msgspec.DecodeError, RecursionError):
        return None
    if "" in kinds or not plain(kinds) or _may_overflow(body):
        return None
    try:
        if not body.isascii():
            body.decode()
    except UnicodeDecodeError:
        return None
    # The ids, where a row keeps them, are read from each text (rare: batch rows don't).
    return Chunks(kinds, Raws(lines))


def _chunks(
    body: bytes,
    found: tuple[list[str], bytes, Any, Any, bool] | None,
    columns_from: int,
    read_ids: Callable[[], IdColumns | None] | None,
) -> Chunks | None:
    """The scan's events as `Chunks`, if it found at least `columns_from` in a UTF-8 body."""
    if found is None or len(found[0]) < columns_from:
        return None
    kinds, spans, _, _, ascii = found
    if not ascii:
        try:
            body.decode()
        except UnicodeDecodeError:
            return None
    # The scan refuses anything nested deeper than MAX_EVENT_DEPTH (its MAX_DEPTH).
    return Chunks(kinds, Spans(body, spans), read_ids, shallow=True)


def _value(body: bytes, bounds: tuple[int, int] | None, default: Any) -> Any:
    """An envelope field's value, decoded as the envelope's decoder would."""
    return default if bounds is None else msgspec.json.decode(body[bounds[0] : bounds[1]])


class Spans:
    """`Texts` of a body by the scan's bounds (`_scan.scan`'s `spans`)."""

    __slots__ = ("_at", "_body", "_spans")

    def __init__(self, body: bytes, spans: bytes) -> None:
        self._body = body
        self._spans = spans
        self._at = memoryview(spans).cast("q")

    def text(self, index: int) -> str:
        at = self._at
        return self._body[at[2 * index] : at[2 * index + 1]].decode()

    def texts(self) -> list[str]:
        return _scan.texts(self._body, self._spans)

    def joined(self, start: int, end: int, separator: str) -> str:
        return _scan.joined(self._body, self._spans, start, end, separator.encode())


class Raws:
    """`Texts` of a body by msgspec's raw slices (or an NDJSON body's lines)."""

    __slots__ = ("_raws",)

    def __init__(self, raws: list[msgspec.Raw] | list[bytes]) -> None:
        self._raws = raws

    def text(self, index: int) -> str:
        return str(self._raws[index], "utf-8")

    def texts(self) -> list[str]:
        return list(map(str, self._raws, repeat("utf-8")))

    def joined(self, start: int, end: int, separator: str) -> str:
        return separator.encode().join(self._raws[start:end]).decode()


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
    return Chunks(kinds, Raws(raws), lambda: _ids(body))


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
