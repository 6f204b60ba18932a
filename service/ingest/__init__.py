"""Ingest: turn what producers send into validated chunks for the log.

Limits and validation live here, before anything reaches the log, so a bad
batch is refused whole and the log never sees half of it.
"""

from service.ingest.batch import (
    Batch,
    Limits,
    expected_from_query,
    parse_json_batch,
    parse_ndjson_batch,
    whole_number,
)

__all__ = [
    "Batch",
    "Limits",
    "expected_from_query",
    "parse_json_batch",
    "parse_ndjson_batch",
    "whole_number",
]
