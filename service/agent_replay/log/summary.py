"""What a run's chunks add to its maintained summary columns.

One set of rules for the append path (per group commit) and for import
(per whole run): the last terminal chunk, its error text and code, the distinct
tool names called (`TOOL_CALL_START.toolCallName`, or the legacy `toolName`),
and token usage summed over `RUN_FINISHED.usage`.

The chunks themselves are stored as received; a summary is derived data kept
in ordinary columns, so it is made storable: `\\u0000` and unpaired surrogates
(valid in a chunk, refused by PostgreSQL text) become U+FFFD, and token sums
saturate at the bigint range. Otherwise one such chunk would fail its whole
group commit, every producer in it included.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import Any

from agent_replay.log.chunks import (
    Chunks,
    error_code,
    error_message,
    loads,
    storable,
    text_at,
    types_of,
)
from agent_replay.log.values import StoredChunk

_TYPE = attrgetter("type")
# The chunk types a summary reads; every other chunk adds nothing to it.
SUMMARIZED = frozenset({"RUN_FINISHED", "RUN_ERROR", "TOOL_CALL_START"})
USAGE_KEYS = ("promptTokens", "completionTokens", "totalTokens")
TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "total_tokens")
BIGINT_MAX = 2**63 - 1


def _saturate(count: int) -> int:
    return max(-BIGINT_MAX, min(BIGINT_MAX, count))


@dataclass(slots=True)
class Summary:
    terminal: str | None = None
    error: str | None = None
    error_code: str | None = None
    tools: list[str] = field(default_factory=list)  # sorted, distinct
    usage: list[int | None] = field(default_factory=lambda: [None, None, None])


def adds_to_summary(chunks: Iterable[StoredChunk]) -> bool:
    """Whether `summarize` finds anything in `chunks` (most groups: no), in C."""
    kinds = chunks.types if type(chunks) is Chunks else map(_TYPE, chunks)
    return not SUMMARIZED.isdisjoint(kinds)


def summarize(chunks: Iterable[StoredChunk]) -> Summary:
    return summarize_parts([chunks])


def summarize_parts(parts: Iterable[Iterable[StoredChunk]]) -> Summary:
    """`summarize` of these parts' chunks one after the other, without joining them."""
    summary = Summary()
    tools: set[str] = set()
    for part in parts:
        # Not isinstance(part, Sequence): an ABC's check costs more than the copy it saves.
        chunks: Sequence[StoredChunk] = (
            part if type(part) is list or type(part) is Chunks else list(part)
        )
        types = types_of(chunks)
        if SUMMARIZED.isdisjoint(types):
            continue  # the common case
        # Only the summarized chunks, picked in C: the rest need no look.
        for index in compress(range(len(types)), map(SUMMARIZED.__contains__, types)):
            _fold(summary, tools, types[index], loads(text_at(chunks, index)))
    summary.tools = sorted(tools)
    return summary


def _fold(summary: Summary, tools: set[str], kind: str, value: Any) -> None:
    """What one summarized chunk (`kind`, parsed `value`) adds to `summary` and `tools`."""
    if kind == "TOOL_CALL_START":
        name = tool_name(value)
        if name is not None:
            tools.add(name)
        return
    summary.terminal = kind
    summary.error = storable(error_message(value)) if kind == "RUN_ERROR" else None
    code = error_code(value) if kind == "RUN_ERROR" else None
    summary.error_code = None if code is None else storable(code)
    usage = value.get("usage") if kind == "RUN_FINISHED" else None
    if isinstance(usage, dict):
        for i, key in enumerate(USAGE_KEYS):
            count = usage.get(key)
            if isinstance(count, int) and not isinstance(count, bool):
                summary.usage[i] = _saturate((summary.usage[i] or 0) + count)


def tool_name(value: Any) -> str | None:
    """The tool a parsed TOOL_CALL_START names (as the summary stores it), or None."""
    name = value.get("toolCallName", value.get("toolName"))
    return storable(name) if isinstance(name, str) and name else None
