"""Single chunks from a hosted run's upstream, validated like any appended chunk.

A driver's events go through the same checks as an HTTP append's (a JSON
object with a string `type`, at most `max_chunk_bytes`, nested at most
`MAX_EVENT_DEPTH`), so what reaches the log is the same whoever produced it.
Failures are the same `InvalidInput` errors; the driver words them for the
run's RUN_ERROR.
"""

from __future__ import annotations

from typing import Any

from agent_replay.ingest.batch import Limits
from agent_replay.log.chunks import check_nesting, loads, stored
from agent_replay.log.values import StoredChunk


def chunk_from_text(text: str, index: int, limits: Limits) -> StoredChunk:
    """An event sent as JSON text (SSE `data:`, an NDJSON line), kept as sent where it can be.

    Text with a raw line break (a multi-line `data:` field) is re-encoded: it
    would break SSE framing on replay.
    """
    value = loads(text)
    kept = text if "\n" not in text and "\r" not in text else None
    chunk = stored(value, index, kept)
    limits.check_chunk(chunk, index)
    check_nesting([chunk], index)
    return chunk


def chunk_from_value(value: Any, index: int, limits: Limits) -> StoredChunk:
    """An event an in-process agent yielded as a parsed value."""
    chunk = stored(value, index)
    limits.check_chunk(chunk, index)
    check_nesting([chunk], index)
    return chunk
