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
from dataclasses import dataclass
from typing import Any

import orjson

from service.errors import InvalidEvent, InvalidJson

TERMINAL_TYPES = frozenset({"RUN_FINISHED", "RUN_ERROR"})

# orjson silently turns integers past 64 bits into floats; a run of 20+ digits
# sends that text down the exact (slower) path. False positives inside strings
# cost only speed.
_LONG_DIGITS = re.compile(rb"\d{20,}")


@dataclass(frozen=True, slots=True)
class StoredChunk:
    type: str
    text: str
    message_id: str | None
    tool_call_id: str | None
    # For the run's maintained summary: the error text of a RUN_ERROR chunk.
    error_message: str | None = None
    # A RUN_STARTED chunk's threadId: a run created by its first append takes it.
    thread_id: str | None = None


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
    if not _LONG_DIGITS.search(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # maybe a lone surrogate or a huge number: the exact parser decides
    try:
        text = raw.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_reject_constant, parse_float=_exact_float)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidJson(f"the body is not valid JSON: {exc}") from exc


def dumps(value: Any) -> str:
    """Compact JSON text for a parsed value, lossless for what `loads` accepts."""
    try:
        return orjson.dumps(value).decode()
    except (TypeError, orjson.JSONEncodeError):
        # Lone surrogates or integers orjson cannot hold: ASCII escapes keep both.
        return json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def _optional_str(chunk: dict[str, Any], key: str) -> str | None:
    value = chunk.get(key)
    return value if isinstance(value, str) else None


def _error_message(chunk: dict[str, Any]) -> str | None:
    # AG-UI puts the text in `message`; TanStack's chunks carry `error.message`.
    message = chunk.get("message")
    if isinstance(message, str):
        return message
    error = chunk.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    return "run error"


def stored(chunk: Any, index: int, text: str | None = None) -> StoredChunk:
    """Validate one parsed chunk and give its stored form.

    `text` is the chunk's own JSON text when the caller already has it (an
    NDJSON line), so it is kept as received instead of re-encoded.
    """
    if not isinstance(chunk, dict):
        raise InvalidEvent(f"event {index} is not a JSON object", index=index)
    kind = chunk.get("type")
    if not isinstance(kind, str) or not kind:
        raise InvalidEvent(f"event {index} has no non-empty string 'type'", index=index)
    return StoredChunk(
        type=kind,
        text=dumps(chunk) if text is None else text,
        message_id=_optional_str(chunk, "messageId"),
        tool_call_id=_optional_str(chunk, "toolCallId"),
        error_message=_error_message(chunk) if kind == "RUN_ERROR" else None,
        thread_id=_optional_str(chunk, "threadId") if kind == "RUN_STARTED" else None,
    )
