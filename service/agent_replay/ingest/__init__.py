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
from agent_replay.ingest.redact import Redactor, Rules, record, redact_request
from agent_replay.ingest.rules import DEFAULT_MAX_WINDOW, NONE, RuleSet, parse_rules

__all__ = [
    "DEFAULT_MAX_WINDOW",
    "NONE",
    "Batch",
    "Limits",
    "Redactor",
    "RuleSet",
    "Rules",
    "chunk_from_text",
    "chunk_from_value",
    "expected_from_query",
    "parse_json_batch",
    "parse_ndjson_batch",
    "parse_rules",
    "record",
    "redact_request",
    "whole_number",
]
