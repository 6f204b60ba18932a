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
from agent_replay.ingest.held import Holds, append_redacted, redact_locked
from agent_replay.ingest.redact import Redactor, Rules, record, redact_request
from agent_replay.ingest.rules import DEFAULT_MAX_WINDOW, NONE, RuleSet, parse_rules
from agent_replay.ingest.ui_batch import UIBatch, map_ui_batch, read_ui_batch
from agent_replay.ingest.ui_chunks import HISTORY_EVENTS, UIChunkMapper, needs_history

__all__ = [
    "DEFAULT_MAX_WINDOW",
    "HISTORY_EVENTS",
    "NONE",
    "Batch",
    "Holds",
    "Limits",
    "Redactor",
    "RuleSet",
    "Rules",
    "UIBatch",
    "UIChunkMapper",
    "append_redacted",
    "chunk_from_text",
    "chunk_from_value",
    "expected_from_query",
    "map_ui_batch",
    "needs_history",
    "parse_json_batch",
    "parse_ndjson_batch",
    "parse_rules",
    "read_ui_batch",
    "record",
    "redact_locked",
    "redact_request",
    "whole_number",
]
