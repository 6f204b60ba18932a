"""Direct appends of AI SDK UI message stream chunks (`?format=ai-sdk`), read and mapped.

The body is an append's usual one, JSON `{"events": [chunk, ...], "expected_seq"?,
"close"?}` or NDJSON (a chunk a line), holding UI message stream chunks instead of
AG-UI events. They are read and bounded as any append's are, then mapped by
`agent_replay.ingest.ui_chunks` (the hosted AI SDK agents' mapping) into the AG-UI
events the log stores, each of which is checked again (its size, its nesting).
Refused whole: a chunk that is no UI chunk, or an event over a limit, appends nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_replay.ingest.batch import Batch, Limits, parse_json_batch, parse_ndjson_batch
from agent_replay.ingest.events import chunk_from_value
from agent_replay.ingest.ui_chunks import UIChunkMapper
from agent_replay.log.chunks import loads


@dataclass(frozen=True, slots=True)
class UIBatch:
    chunks: list[Any]  # parsed UI chunks
    expected_seq: int | None = None
    close: bool = False


def read_ui_batch(
    body: bytes, limits: Limits, *, ndjson: bool, expected_seq: int | None, close: bool
) -> UIBatch:
    """An append body of UI chunks, read and bounded like an AG-UI append's."""
    if ndjson:
        batch = parse_ndjson_batch(
            body, limits, expected_seq=expected_seq, close=close, columns_from=None
        )
    else:
        batch = parse_json_batch(body, limits, columns_from=None)
    return UIBatch([loads(c.text) for c in batch.chunks], batch.expected_seq, batch.close)


def map_ui_batch(batch: UIBatch, mapper: UIChunkMapper, limits: Limits) -> Batch:
    """The AG-UI events `batch`'s chunks become (InvalidInput for the first one refused)."""
    events = [
        chunk_from_value(event, index, limits)
        for index, chunk in enumerate(batch.chunks)
        for event in mapper.feed(chunk, index)
    ]
    limits.check_count(len(events))
    return Batch(events, batch.expected_seq, batch.close)
