"""What a run's chunks add to its maintained summary columns.

One set of rules for the append path (per group commit) and for import
(per whole run): the last terminal chunk and its error text, the distinct
tool names called (`TOOL_CALL_START.toolCallName`, or the legacy `toolName`),
and token usage summed over `RUN_FINISHED.usage`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from service.log.chunks import StoredChunk, error_message, loads

_SUMMARIZED = frozenset({"RUN_FINISHED", "RUN_ERROR", "TOOL_CALL_START"})
USAGE_KEYS = ("promptTokens", "completionTokens", "totalTokens")


@dataclass(slots=True)
class Summary:
    terminal: str | None = None
    error: str | None = None
    tools: list[str] = field(default_factory=list)  # sorted, distinct
    usage: list[int | None] = field(default_factory=lambda: [None, None, None])


def summarize(chunks: Iterable[StoredChunk]) -> Summary:
    summary = Summary()
    tools: set[str] = set()
    for chunk in chunks:
        kind = chunk.type
        if kind not in _SUMMARIZED:
            continue  # the common case: no parse
        value = loads(chunk.text)
        if kind == "TOOL_CALL_START":
            name = value.get("toolCallName", value.get("toolName"))
            if isinstance(name, str) and name:
                tools.add(name)
            continue
        summary.terminal = kind
        summary.error = error_message(value) if kind == "RUN_ERROR" else None
        usage = value.get("usage") if kind == "RUN_FINISHED" else None
        if isinstance(usage, dict):
            for i, key in enumerate(USAGE_KEYS):
                count = usage.get(key)
                if isinstance(count, int) and not isinstance(count, bool):
                    summary.usage[i] = (summary.usage[i] or 0) + count
    summary.tools = sorted(tools)
    return summary
