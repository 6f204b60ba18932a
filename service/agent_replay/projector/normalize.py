"""Opt-in normalization of legacy chunks, as TanStack's server side applies it
(``normalizeStreamChunk``, npm ``@tanstack/ai`` 0.58.0) before a chunk reaches a client.

Every form it rewrites, in its order:

* only the AG-UI spec's keys for the type stay at the top level; every other key moves into
  ``metadata.tanstack`` (which the client lifts back, ``restoreInboundChunk``), except the
  keys it drops: ``result`` and ``error`` everywhere, the accumulated ``content``, ``args``
  and ``model`` of ``TEXT_MESSAGE_CONTENT`` / ``TOOL_CALL_ARGS``, ``toolName`` of
  ``TOOL_CALL_START``; ``model``, ``finishReason`` and ``tanstack:interruptErrors`` go to the
  bag (the last as ``interruptErrors``), and so do ``threadId`` / ``runId`` of ``CUSTOM``
  and ``RUN_ERROR``;
* ``TOOL_CALL_START.toolName`` becomes ``toolCallName``; ``RUN_ERROR.error.{message,code}``
  become top-level ``message`` / ``code``;
* TanStack token usage (``promptTokens``…) on ``RUN_FINISHED`` / ``RUN_ERROR`` becomes the
  spec's ``usage: [{inputTokens, outputTokens, totalTokens, cachedInputTokens?,
  reasoningTokens?}]``, the rest kept in ``metadata.tanstack.usage``;
* a ``signature`` (legacy thinking steps, reasoning messages, tool calls) and a
  ``TOOL_CALL_START``'s ``metadata.thoughtSignature`` become a following
  ``REASONING_ENCRYPTED_VALUE`` chunk;
* a ``TOOL_CALL_END`` carrying ``result`` is followed by a ``TOOL_CALL_RESULT``.

Off by default: the default projection is what a client of the raw log sees.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent_replay.event_types import BASE_FIELDS, CATALOG
from agent_replay.projector.jsvalues import UNDEF, stringify, tanstack_bag, truthy

Chunk = dict[str, Any]

_SHARED = frozenset(BASE_FIELDS)

# spec-event-keys.ts: the top-level keys the AG-UI spec defines per event type.
SPEC_KEYS: dict[str, frozenset[str]] = {t.name: _SHARED | frozenset(t.fields) for t in CATALOG}
_STREAMED = frozenset({"TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS"})


def _string_field(value: Any) -> str | None:
    return value if isinstance(value, str) and value != "" else None


def _spread(value: Any) -> dict[str, Any]:
    """JavaScript's ``{...value}`` for a JSON value."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (list, str)):
        return {str(i): v for i, v in enumerate(value)}
    return {}


def _defined(value: dict[str, Any]) -> dict[str, Any] | None:
    return value if value else None


def _spec_usage(usage: dict[str, Any], model: Any) -> tuple[list[dict[str, Any]], Any]:
    """``toSpecTokenUsage``: the spec's usage list and the leftover TanStack fields."""
    rest = {
        k: v
        for k, v in usage.items()
        if k
        not in (
            "promptTokens",
            "completionTokens",
            "totalTokens",
            "promptTokensDetails",
            "completionTokensDetails",
        )
    }
    spec: dict[str, Any] = {}
    if isinstance(model, str):
        spec["model"] = model
    for key, source in (
        ("inputTokens", "promptTokens"),
        ("outputTokens", "completionTokens"),
        ("totalTokens", "totalTokens"),
    ):
        if source in usage:
            spec[key] = usage[source]
    prompt = usage.get("promptTokensDetails")
    completion = usage.get("completionTokensDetails")
    if isinstance(prompt, dict) and "cachedTokens" in prompt:
        spec["cachedInputTokens"] = prompt["cachedTokens"]
    if isinstance(completion, dict) and "reasoningTokens" in completion:
        spec["reasoningTokens"] = completion["reasoningTokens"]
    leftover = dict(rest)
    if truthy(prompt):
        left = _defined({k: v for k, v in _spread(prompt).items() if k != "cachedTokens"})
        if left is not None:
            leftover["promptTokensDetails"] = left
    if truthy(completion):
        left = _defined({k: v for k, v in _spread(completion).items() if k != "reasoningTokens"})
        if left is not None:
            leftover["completionTokensDetails"] = left
    return [spec], _defined(leftover)


def _with_bag(value: Chunk, bag: dict[str, Any]) -> Chunk:
    """``withTanstackMetadata``."""
    current = value.get("metadata")
    merged = {**(tanstack_bag(value) or {}), **bag}
    return {**value, "metadata": {**_spread(current), "tanstack": merged}}


def _encrypted(entity: str, value: str, subtype: str, timestamp: Any) -> Chunk:
    out: Chunk = {
        "type": "REASONING_ENCRYPTED_VALUE",
        "subtype": subtype,
        "entityId": entity,
        "encryptedValue": value,
    }
    if timestamp is not UNDEF:
        out["timestamp"] = timestamp
    return out


def _encrypted_extras(chunk: Chunk) -> list[Chunk]:
    extras: list[Chunk] = []
    stamp = chunk.get("timestamp", UNDEF)
    timestamp = stamp if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) else UNDEF
    signature = chunk.get("signature")
    if isinstance(signature, str) and signature:
        call_id = _string_field(chunk.get("toolCallId"))
        entity = (
            _string_field(chunk.get("stepId"))
            or _string_field(chunk.get("stepName"))
            or _string_field(chunk.get("messageId"))
            or call_id
        )
        if entity is not None:
            subtype = (
                "tool-call" if call_id and not truthy(chunk.get("stepId", UNDEF)) else "message"
            )
            extras.append(_encrypted(entity, signature, subtype, timestamp))
    if chunk.get("type") == "TOOL_CALL_START":
        metadata = chunk.get("metadata")
        thought = (
            _string_field(metadata.get("thoughtSignature")) if isinstance(metadata, dict) else None
        )
        call = chunk.get("toolCallId", UNDEF)
        if thought is not None and truthy(call):
            extras.append(_encrypted(call, thought, "tool-call", timestamp))
    return extras


def normalize_chunk(chunk: Chunk) -> Iterator[Chunk]:
    """The chunk as TanStack's server would send it, then the chunks it adds."""
    kind = chunk.get("type")
    spec_keys = SPEC_KEYS.get(kind, _SHARED) if isinstance(kind, str) else _SHARED
    spec = {k: v for k, v in chunk.items() if k in spec_keys}
    if kind == "TOOL_CALL_START" and "toolCallName" not in spec and truthy(chunk.get("toolName")):
        spec["toolCallName"] = chunk["toolName"]
    error = chunk.get("error")
    if kind == "RUN_ERROR" and error is not None and isinstance(error, dict):
        if "message" not in spec and truthy(error.get("message", UNDEF)):
            spec["message"] = error["message"]
        if "code" not in spec and "code" in error:
            spec["code"] = error["code"]

    bag: dict[str, Any] = {}
    if "model" in chunk and kind not in _STREAMED:
        bag["model"] = chunk["model"]
    if "finishReason" in chunk:
        bag["finishReason"] = chunk["finishReason"]
    if "tanstack:interruptErrors" in chunk:
        bag["interruptErrors"] = chunk["tanstack:interruptErrors"]
    if kind in ("CUSTOM", "RUN_ERROR"):
        for key in ("threadId", "runId"):
            if key in chunk:
                bag[key] = chunk[key]
    skip = {"result", "error", "tanstack:interruptErrors"}
    if kind in _STREAMED:
        skip |= {"model", "content", "args"}
    if kind == "TOOL_CALL_START":
        skip.add("toolName")
    for key, value in chunk.items():
        if key in spec_keys or key in skip or key in bag:
            continue
        bag[key] = value
    usage = spec.get("usage")
    if (
        kind in ("RUN_FINISHED", "RUN_ERROR")
        and isinstance(usage, dict)
        and "promptTokens" in usage
    ):
        spec["usage"], leftover = _spec_usage(usage, chunk.get("model"))
        if leftover is not None:
            bag["usage"] = leftover

    yield _with_bag(spec, bag) if bag else spec
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
    yield from _encrypted_extras(chunk)
