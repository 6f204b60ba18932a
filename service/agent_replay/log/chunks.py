"""A chunk as the log stores it: its JSON text plus the columns queries need.

The text is what replay sends, byte for byte, so it is produced once here and
never re-encoded. It must survive everything a JavaScript producer can emit,
including strings PostgreSQL's `jsonb` refuses (`\\u0000`, unpaired UTF-16
surrogates, since JS splits emoji between deltas), which is why the log keeps
text, not `jsonb`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate, repeat
from operator import add, attrgetter
from typing import Any, Protocol, overload

import orjson

from agent_replay.errors import InvalidEvent, InvalidJson, NestedTooDeep
from agent_replay.log.values import StoredChunk

# orjson silently turns integers past 64 bits into floats: from 20 digits, or a
# minus and 19 (below -2**63). Such a run sends the text down the exact (slower)
# path; false positives inside strings cost only speed. Found by mapping digits
# and "-" to "0" and the rest to " " and looking for twenty zeros: two C passes,
# far faster than a regex on a big body.
_DIGITS_ONLY = bytes.maketrans(
    bytes(range(256)),
    bytes(0x30 if 0x30 <= b <= 0x39 or b == 0x2D else 0x20 for b in range(256)),
)
_TWENTY_DIGITS = b"0" * 20


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

MAX_EVENT_DEPTH = 200
"""How deeply an event may nest objects and arrays (the event object itself is level 1).

Deeper events are refused at every append (422 `invalid_event`): no AG-UI producer comes
near, and every later walk over stored values stays shallow. It is also the C scan's own
bound (`MAX_DEPTH` in service/agent_replay/ingest/_scan.c), so what the scan vouches for (the
`Chunks` it builds, `shallow`) needs no second look."""

# A JSON string literal (the unrolled form: no backtracking per character).
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deeply the JSON `text` nests objects and arrays: one linear pass, no recursion.

    Brackets inside strings do not count; `text` is taken to be valid JSON.
    """
    brackets = _NOT_BRACKET.sub("", _STRING_LITERAL.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def value_nesting(value: Any) -> int:
    """`nesting` of a parsed value, by a walk with its own stack (no recursion)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = item.values()
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth)
        stack.extend(zip(item, repeat(depth + 1)))
    return deepest


def _too_deep(depth: int, index: int) -> NestedTooDeep:
    return NestedTooDeep(
        f"event {index} is nested {depth} levels deep; at most {MAX_EVENT_DEPTH} are allowed",
        index=index,
    )


def check_nesting(chunks: Sequence[StoredChunk], first: int = 0) -> None:
    """Refuse (NestedTooDeep) the first chunk nested deeper than `MAX_EVENT_DEPTH`;
    `first`: the index the first chunk has in what was sent.

    Runs on every append: a text cannot nest deeper than it has openers, so C counts
    spare the scan for all but the rare chunk with more openers than the bound."""
    if type(chunks) is Chunks:
        if chunks.shallow:
            return
        texts = chunks.texts()
    elif len(chunks) == 1:  # the commonest append, a token
        text = chunks[0].text
        if text.count("[") + text.count("{") <= MAX_EVENT_DEPTH:
            return
        texts = [text]
    else:
        texts = list(map(_TEXT, chunks))
    openers = list(map(add, map(str.count, texts, repeat("[")), map(str.count, texts, repeat("{"))))
    if max(openers, default=0) <= MAX_EVENT_DEPTH:
        return
    for index, text in enumerate(texts):
        if openers[index] > MAX_EVENT_DEPTH and (depth := nesting(text)) > MAX_EVENT_DEPTH:
            raise _too_deep(depth, first + index)


def storable(text: str) -> str:
    """`text` as a PostgreSQL text column can hold it: NUL and lone surrogates as U+FFFD.

    For the columns derived from a chunk (its type and ids, a run's thread and
    summaries): valid in the chunk, whose text keeps them as JSON escapes, but
    refused by a text column, which would fail the whole group commit.
    """
    if text.isascii() and "\x00" not in text:
        return text  # the common case, without a regex
    return _UNSTORABLE.sub("\ufffd", text)


_TYPE = attrgetter("type")
_TEXT = attrgetter("text")


# Each chunk's message id and tool-call id column, as `stored` keeps them.
IdColumns = tuple[list[str | None], list[str | None]]


def stored_id(value: Any) -> str | None:
    """An id as `stored` keeps it: a string made storable, anything else None."""
    return storable(value) if type(value) is str else None


def _ids_in(chunk: dict[str, Any]) -> tuple[str | None, str | None]:
    """A parsed chunk's message id and tool-call id, as `stored` keeps them."""
    return stored_id(chunk.get("messageId")), stored_id(chunk.get("toolCallId"))


class Texts(Protocol):
    """Chunks' JSON texts, each a slice of one body (already checked to be UTF-8 holding
    no raw CR or LF, which `agent_replay.log.rows` relies on), decoded only when asked for."""

    def text(self, index: int) -> str: ...

    def texts(self) -> list[str]:
        """Every text (a new list each call)."""
        ...

    def joined(self, start: int, end: int, separator: str) -> str:
        """The texts `start` to `end` joined by `separator`."""
        ...


class Chunks(Sequence[StoredChunk]):
    """A large body's chunks (JSON or NDJSON) as columns: their types, and their texts as
    the body's own slices, decoded only when asked for (agent_replay.ingest.verbatim).

    Storing a large batch needs each chunk's type but its texts only joined (a batch
    row, agent_replay.log.rows), and the ids not at all: building a `StoredChunk` per
    event, and a string per text, was a sixth of such an append's CPU. Read by
    position or in turn, it gives the same `StoredChunk`s `stored` makes of the same
    values (the ids read then: by `read_ids` for all at once, else from each chunk's
    text); the hot readers take its columns instead (`types_of`, `texts_of`,
    `text_at`, `joined`).
    """

    __slots__ = ("_ids", "_read_ids", "_source", "_texts", "shallow", "types")

    def __init__(
        self,
        types: list[str],
        source: Texts,
        read_ids: Callable[[], IdColumns | None] | None = None,
        *,
        shallow: bool = False,
    ) -> None:
        """`types`: storable as they are; `source`: the chunks' texts, in the same order;
        `read_ids`: every chunk's ids as `stored` keeps them, or None where it cannot
        tell (each text is parsed); `shallow`: no text nests deeper than
        `MAX_EVENT_DEPTH` (the C scan checked)."""
        self.types = types
        self.shallow = shallow
        self._source = source
        self._read_ids = read_ids
        self._texts: list[str] | None = None
        self._ids: IdColumns | None = None

    def __len__(self) -> int:
        return len(self.types)

    def text(self, index: int) -> str:
        texts = self._texts
        return texts[index] if texts is not None else self._source.text(index)

    def texts(self) -> list[str]:
        """Every chunk's text, decoded once (the caller must not change the list)."""
        if self._texts is None:
            self._texts = self._source.texts()
        return self._texts

    def joined(self, start: int, end: int, separator: str) -> str:
        """The texts of chunks `start` to `end` joined by `separator`, decoded at once."""
        return self._source.joined(start, end, separator)

    def _id_columns(self) -> IdColumns:
        if self._ids is None:
            found = None if self._read_ids is None else self._read_ids()
            if found is None:
                pairs = [_ids_in(loads(text)) for text in self.texts()]
                found = ([pair[0] for pair in pairs], [pair[1] for pair in pairs])
            self._ids = found
        return self._ids

    @overload
    def __getitem__(self, index: int) -> StoredChunk: ...

    @overload
    def __getitem__(self, index: slice) -> list[StoredChunk]: ...

    def __getitem__(self, index: int | slice) -> StoredChunk | list[StoredChunk]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        position = range(len(self))[index]  # negative indexes, and IndexError
        text = self.text(position)
        if self._ids is not None:
            ids = (self._ids[0][position], self._ids[1][position])
        else:  # one chunk: its own text, not every chunk's ids
            ids = _ids_in(loads(text))
        return _new_chunk(StoredChunk, (self.types[position], text, *ids))

    def __iter__(self) -> Iterator[StoredChunk]:
        message_ids, tool_call_ids = self._id_columns()
        columns = zip(self.types, self.texts(), message_ids, tool_call_ids, strict=True)
        return map(_new_chunk, repeat(StoredChunk), columns)


def types_of(chunks: Sequence[StoredChunk]) -> list[str]:
    """Each chunk's type (a `Chunks`' own column: not to be changed)."""
    return chunks.types if type(chunks) is Chunks else list(map(_TYPE, chunks))


def texts_of(chunks: Sequence[StoredChunk]) -> list[str]:
    """Each chunk's text (a `Chunks`' own list: not to be changed)."""
    return chunks.texts() if type(chunks) is Chunks else list(map(_TEXT, chunks))


def text_at(chunks: Sequence[StoredChunk], index: int) -> str:
    return chunks.text(index) if type(chunks) is Chunks else chunks[index].text


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _exact_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"number {text} is out of range")
    return value


def loads(data: bytes | str) -> Any:
    """Parse JSON text exactly: lone surrogates kept, big integers kept, no NaN."""
    raw = data.encode() if isinstance(data, str) else data
    if _TWENTY_DIGITS not in raw.translate(_DIGITS_ONLY):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # maybe a lone surrogate or a huge number: the exact parser decides
    try:
        text = raw.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_reject_constant, parse_float=_exact_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidJson(f"the body is not valid JSON: {exc}") from exc
    except RecursionError:
        # Deeper than either parser goes: far past what an event may be.
        raise NestedTooDeep(
            f"the body is nested {nesting(text)} levels deep; an event may nest at most "
            f"{MAX_EVENT_DEPTH}"
        ) from None


def dumps(value: Any) -> str:
    """Compact JSON text for a parsed value, lossless for what `loads` accepts."""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        # Lone surrogates or integers orjson cannot hold: ASCII escapes keep both.
        pass
    try:
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    except RecursionError:
        # orjson stops past 255 levels and this encoder near the interpreter's limit: a
        # value that deep is no event (see MAX_EVENT_DEPTH).
        raise NestedTooDeep(
            f"a value is nested {value_nesting(value)} levels deep; at most {MAX_EVENT_DEPTH} "
            "are allowed"
        ) from None


def error_message(chunk: Any) -> str:
    """The text of a RUN_ERROR chunk: AG-UI's `message`, or TanStack's `error.message`."""
    if isinstance(chunk, dict):
        message = chunk.get("message")
        if isinstance(message, str):
            return message
        error = chunk.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return "run error"


# A code is a short identifier; one longer than this is cut in the runs'
# maintained column (the chunk keeps it whole) so an index entry stays small.
MAX_ERROR_CODE_CHARS = 200


def error_code(chunk: Any) -> str | None:
    """The code of a RUN_ERROR chunk: AG-UI's `code`, or TanStack's `error.code`."""
    if not isinstance(chunk, dict):
        return None
    code = chunk.get("code")
    if not isinstance(code, str):
        error = chunk.get("error")
        code = error.get("code") if isinstance(error, dict) else None
    if not isinstance(code, str) or not code:
        return None
    return code[:MAX_ERROR_CODE_CHARS]


def stored(chunk: Any, index: int, text: str | None = None) -> StoredChunk:
    """Validate one parsed chunk and give its stored form.

    `text` is the chunk's own JSON text when the caller already has it (an
    NDJSON line), so it is kept as received instead of re-encoded.
    """
    if type(chunk) is not dict:
        raise InvalidEvent(f"event {index} is not a JSON object", index=index)
    kind = chunk.get("type")
    if type(kind) is not str or not kind:
        raise InvalidEvent(f"event {index} has no non-empty string 'type'", index=index)
    return StoredChunk(storable(kind), dumps(chunk) if text is None else text, *_ids_in(chunk))


_new_chunk = tuple.__new__
_NONE = type(None)


def plain(texts: list[str | None]) -> bool:
    """Whether every one of these strings is storable as it is (see `storable`)."""
    joined = "".join(filter(None, texts))
    return joined.isascii() and "\x00" not in joined


def _columns(values: list[Any]) -> list[StoredChunk] | None:
    """`stored_values` of the common batch, a column at a time with no test per value:
    all objects with a non-empty string type, ASCII NUL-free type and ids, and
    orjson able to encode each. None for any other batch (the loop then decides,
    value by value)."""
    if set(map(type, values)) != {dict}:
        return None
    kinds = [value.get("type") for value in values]
    if set(map(type, kinds)) != {str} or "" in kinds:
        return None
    message_ids = [value.get("messageId") for value in values]
    tool_call_ids = [value.get("toolCallId") for value in values]
    if not set(map(type, message_ids)) | set(map(type, tool_call_ids)) <= {str, _NONE}:
        return None
    if not (plain(kinds) and plain(message_ids) and plain(tool_call_ids)):
        return None
    encode = orjson.dumps
    try:
        texts = [encode(value).decode() for value in values]
    except (TypeError, orjson.JSONEncodeError):
        return None  # a lone surrogate or a huge integer: `dumps`, in the loop
    columns = zip(kinds, texts, message_ids, tool_call_ids, strict=True)
    # Tuples made directly: StoredChunk's own constructor is a Python call.
    return list(map(_new_chunk, repeat(StoredChunk), columns))


def vouched(value: Any) -> StoredChunk | None:
    """`value` stored when it is an object needing no repair that orjson encodes, else
    None (for `stored` to take: the general way, or the error naming what is wrong)."""
    if type(value) is not dict:
        return None
    kind = value.get("type")
    message_id = value.get("messageId")
    tool_call_id = value.get("toolCallId")
    if not (
        type(kind) is str
        and kind
        and (message_id is None or type(message_id) is str)
        and (tool_call_id is None or type(tool_call_id) is str)
    ):
        return None
    columns = f"{kind}{message_id or ''}{tool_call_id or ''}"
    if not columns.isascii() or "\x00" in columns:
        return None
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        return None  # a lone surrogate or a huge integer: `stored` takes it
    # A tuple made directly: StoredChunk's own constructor is a Python call.
    return _new_chunk(StoredChunk, (kind, text, message_id, tool_call_id))


def stored_token(chunks: object) -> list[StoredChunk] | None:
    """`[stored(chunks[0], 0)]` for a list of one object that needs no repair and that
    orjson encodes (an in-process producer's token, the commonest append); None for any
    other `chunks`, which the caller stores the general way."""
    if type(chunks) is list and len(chunks) == 1:
        chunk = vouched(chunks[0])
        return None if chunk is None else [chunk]
    return None


def stored_values(values: list[Any], *, untyped: bool = False) -> list[StoredChunk]:
    """`stored(value, index)` for each of a parsed body's values, in one tight loop (a
    large batch spends most of its parse here).

    `untyped`: a value that is no AG-UI event (not an object with a non-empty string
    `type`) is kept with an empty type (a Durable Stream's message), not refused.
    """
    if len(values) > 1:
        fast = _columns(values)
        if fast is not None:
            return fast
    out: list[StoredChunk] = []
    append = out.append
    encode = orjson.dumps
    for index, value in enumerate(values):
        kind = value.get("type") if type(value) is dict else None
        if type(kind) is str and kind:
            try:
                text = encode(value).decode()
            except (TypeError, orjson.JSONEncodeError):
                text = dumps(value)
            # A tuple made directly: StoredChunk's own constructor is a Python call.
            message_id = value.get("messageId")
            if type(message_id) is not str:
                message_id = None
            elif not message_id.isascii() or "\x00" in message_id:
                message_id = storable(message_id)
            tool_call_id = value.get("toolCallId")
            if type(tool_call_id) is not str:
                tool_call_id = None
            elif not tool_call_id.isascii() or "\x00" in tool_call_id:
                tool_call_id = storable(tool_call_id)
            if not kind.isascii() or "\x00" in kind:
                kind = storable(kind)
            append(_new_chunk(StoredChunk, (kind, text, message_id, tool_call_id)))
        elif untyped:
            append(_new_chunk(StoredChunk, ("", dumps(value), None, None)))
        else:
            stored(value, index)  # raises the error that names what is wrong
            raise AssertionError("unreachable")
    return out
