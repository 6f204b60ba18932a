"""Opt-in normalization of legacy chunks, as TanStack's server side applies
it (``normalizeStreamChunk``) before a chunk reaches a client.

Logs written before AG-UI's ``TOOL_CALL_RESULT`` existed deliver a tool's
output on ``TOOL_CALL_END.result``; 0.58.0's StreamProcessor ignores that
field, so such a log projects without outputs unless it is normalized first.
Off by default: the default projection is what a client of the raw log sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from service.projector.jsvalues import UNDEF, stringify, truthy

Chunk = dict[str, Any]


def normalize_chunk(chunk: Chunk) -> Iterator[Chunk]:
    """The chunk as the server would send it, plus a TOOL_CALL_RESULT when a
    legacy TOOL_CALL_END carries ``result``."""
    kind = chunk.get("type")
    if kind == "TOOL_CALL_START" and "toolCallName" not in chunk and truthy(chunk.get("toolName")):
        chunk = {**chunk, "toolCallName": chunk["toolName"]}
    elif kind == "RUN_ERROR" and isinstance(chunk.get("error"), dict):
        error = chunk["error"]
        patched = dict(chunk)
        if "message" not in chunk and truthy(error.get("message")):
            patched["message"] = error["message"]
        if "code" not in chunk and error.get("code", UNDEF) is not UNDEF:
            patched["code"] = error["code"]
        chunk = patched
    yield chunk
    if kind == "TOOL_CALL_END" and "result" in chunk:
        result = chunk["result"]
        parent = chunk.get("parentMessageId")
        extra: Chunk = {
            "type": "TOOL_CALL_RESULT",
            "toolCallId": chunk.get("toolCallId", UNDEF),
            "content": stringify(result) if isinstance(result, list) else result,
            "messageId": parent
            if isinstance(parent, str) and parent
            else chunk.get("toolCallId", UNDEF),
        }
        if chunk.get("state") == "output-error":
            extra["metadata"] = {"tanstack": {"state": "output-error"}}
        yield {k: v for k, v in extra.items() if v is not UNDEF}
