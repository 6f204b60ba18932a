"""Stream content as log events, and back.

* JSON streams (`application/json`): a POST's body is one message, or an
  array flattened one level into its elements; each message is one event,
  its JSON text as the log keeps it. A message that is an AG-UI event (an
  object with a string `type`) is indexed like any chunk, so a run written
  as a Durable Stream is projected, listed and audited like any run.
* Every other content type: one event per append, the bytes base64-encoded
  in a `CUSTOM` chunk named `durable-streams.bytes` (lossless for any bytes,
  and still a well-formed event for the run API, export and the inspector).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from agent_replay.errors import EmptyArray, InvalidEvent, PayloadTooLarge
from agent_replay.log.chunks import dumps, loads, stored, stored_values
from agent_replay.log.values import StoredChunk

BYTES_EVENT = "durable-streams.bytes"
_PREFIX = '{"type":"CUSTOM","name":"' + BYTES_EVENT + '","value":"'
_SUFFIX = '"}'


def is_json(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == "application/json"


def is_text(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media.startswith("text/") or media == "application/json"


def message_chunk(value: Any, index: int) -> StoredChunk:
    if type(value) is dict and type(value.get("type")) is str and value["type"]:
        try:
            return stored(value, index)
        except InvalidEvent:
            pass
    # Any other JSON value is a message too; it has no AG-UI type.
    return StoredChunk("", dumps(value), None, None)


def json_messages(body: bytes, *, allow_empty: bool, max_messages: int) -> list[StoredChunk]:
    """A JSON body's messages (400 invalid_json; 400 empty_array for `[]` on append)."""
    value = loads(body)
    if type(value) is list:
        if not value and not allow_empty:
            raise EmptyArray("an empty JSON array appends nothing; send at least one message")
        if len(value) > max_messages:
            raise PayloadTooLarge(f"at most {max_messages} messages per request")
        return stored_values(value, untyped=True)
    return [message_chunk(value, 0)]


def bytes_chunk(data: bytes) -> StoredChunk:
    return StoredChunk("CUSTOM", _PREFIX + base64.b64encode(data).decode() + _SUFFIX, None, None)


def chunk_bytes(text: str) -> bytes:
    """The bytes of a stored append (a byte stream's event)."""
    if text.startswith(_PREFIX) and text.endswith(_SUFFIX):
        try:
            return base64.b64decode(text[len(_PREFIX) : -len(_SUFFIX)], validate=True)
        except binascii.Error:
            pass
    # Not written as bytes (a run's JSON event read as bytes): its JSON text.
    value = loads(text)
    if isinstance(value, dict) and value.get("name") == BYTES_EVENT:
        payload = value.get("value")
        if isinstance(payload, str):
            return base64.b64decode(payload)
    return text.encode("utf-8", "surrogatepass")


def body_of(rows: Sequence[tuple[int, str]], json_mode: bool) -> bytes:
    if json_mode:
        return ("[" + ",".join(text for _, text in rows) + "]").encode("utf-8", "surrogatepass")
    return b"".join(chunk_bytes(text) for _, text in rows)
