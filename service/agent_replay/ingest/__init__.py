"""Ingest: turn what producers send into validated chunks for the log.

Limits and validation live here, before anything reaches the log, so a bad
batch is refused whole and the log never sees half of it.
"""

from agent_replay.ingest.batch import (
    Batch,
    Limits,
    expected_from_query,
    parse_json_batch,
    parse_ndjson_batch,
    whole_number,
)
from agent_replay.ingest.events import chunk_from_text, chunk_from_value
from agent_replay.ingest.ui_chunks import UIChunkMapper

__all__ = [
    "Batch",
    "Limits",
    "UIChunkMapper",
    "chunk_from_text",
    "chunk_from_value",
    "expected_from_query",
    "parse_json_batch",
    "parse_ndjson_batch",
    "whole_number",
]
