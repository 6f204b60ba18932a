"""AI SDK UI message stream chunks in, the AI SDK `UIMessage` they build out.

What `readUIMessageStream` (npm `ai` 5) folds a stream into, for
`GET /v1/ai-sdk/{agent}/{chatId}/messages`: a page that reloads starts
`useChat({ messages })` from the same message the stream gave it. Pure; the
chunks come from `agent_replay.projector.ai_sdk`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_replay.projector.ai_sdk import Chunk
from agent_replay.projector.partial_json import parse_partial

# The chunks that add a part of their own, and the fields the client copies into it.
_PART_FIELDS = {
    "source-url": ("sourceId", "url", "title", "providerMetadata"),
    "source-document": ("sourceId", "mediaType", "title", "filename", "providerMetadata"),
    "file": ("mediaType", "url", "providerMetadata"),
    "reasoning-file": ("mediaType", "url", "providerMetadata"),
}


def _merge(base: Any, overrides: Any) -> Any:
    """The AI SDK's `mergeObjects`: objects merge key by key, anything else replaces."""
    if not isinstance(base, dict) or not isinstance(overrides, dict):
        return overrides
    merged = dict(base)
    for key, value in overrides.items():
        merged[key] = _merge(merged.get(key), value) if isinstance(value, dict) else value
    return merged


class UIMessageBuilder:
    def __init__(self, message_id: str, role: str = "assistant") -> None:
        self.message: dict[str, Any] = {"id": message_id, "role": role, "parts": []}
        self._text: dict[str, dict[str, Any]] = {}
        self._reasoning: dict[str, dict[str, Any]] = {}
        self._tools: dict[str, dict[str, Any]] = {}
        self._raw: dict[str, str] = {}

    @property
    def parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = self.message["parts"]
        return parts

    def _metadata(self, value: Any) -> None:
        if value is None:
            return
        current = self.message.get("metadata")
        self.message["metadata"] = value if current is None else _merge(current, value)

    def apply(self, chunk: Chunk) -> None:
        kind = chunk.get("type")
        part: dict[str, Any]
        if kind == "start":
            if isinstance(chunk.get("messageId"), str):
                self.message["id"] = chunk["messageId"]
            self._metadata(chunk.get("messageMetadata"))
        elif kind in ("finish", "message-metadata"):
            self._metadata(chunk.get("messageMetadata"))
        elif kind == "text-start":
            self._text[chunk["id"]] = part = {"type": "text", "text": "", "state": "streaming"}
            self.parts.append(part)
        elif kind == "reasoning-start":
            part = {"type": "reasoning", "id": chunk["id"], "text": "", "state": "streaming"}
            self._reasoning[chunk["id"]] = part
            self.parts.append(part)
        elif kind in ("text-delta", "reasoning-delta"):
            part = (self._text if kind == "text-delta" else self._reasoning)[chunk["id"]]
            part["text"] += chunk["delta"]
        elif kind in ("text-end", "reasoning-end"):
            part = (self._text if kind == "text-end" else self._reasoning).pop(chunk["id"])
            part["state"] = "done"
        elif kind == "start-step":
            self.parts.append({"type": "step-start"})
        elif kind == "finish-step":
            self._text.clear()
            self._reasoning.clear()
        elif kind == "tool-input-start":
            part = {"type": f"tool-{chunk['toolName']}", "toolCallId": chunk["toolCallId"]}
            part["state"] = "input-streaming"
            self._tools[chunk["toolCallId"]] = part
            self._raw[chunk["toolCallId"]] = ""
            self.parts.append(part)
        elif kind == "tool-input-delta":
            call = chunk["toolCallId"]
            self._raw[call] += chunk["inputTextDelta"]
            part = self._tools[call]
            part["input"] = parse_partial(self._raw[call])
            part["rawInput"] = self._raw[call]
        elif kind == "tool-input-available":
            self._tool(chunk, state="input-available", input=chunk.get("input"))
        elif kind == "tool-input-error":
            self._tool(
                chunk, state="output-error", rawInput=chunk.get("input"),
                errorText=chunk.get("errorText"),
            )  # fmt: skip
        elif kind == "tool-output-available":
            part = self._tools[chunk["toolCallId"]]
            part["state"], part["output"] = "output-available", chunk.get("output")
            part.pop("rawInput", None)
        elif kind == "tool-output-error":
            part = self._tools[chunk["toolCallId"]]
            part["state"], part["errorText"] = "output-error", chunk.get("errorText")
        elif kind == "tool-approval-request":
            part = self._tools[chunk["toolCallId"]]
            part["state"], part["approval"] = "approval-requested", {"id": chunk["approvalId"]}
        elif kind in _PART_FIELDS:
            # Sources and files (an AI SDK producer's): a part each, as the client makes it.
            fields = _PART_FIELDS[kind]
            self.parts.append({"type": kind, **{k: chunk[k] for k in fields if k in chunk}})
        elif isinstance(kind, str) and kind.startswith("data-") and not chunk.get("transient"):
            self._data(chunk)

    def _tool(self, chunk: Chunk, **fields: Any) -> None:
        call = chunk["toolCallId"]
        part = self._tools.get(call)
        if part is None:
            part = {"type": f"tool-{chunk['toolName']}", "toolCallId": call}
            self._tools[call] = part
            self.parts.append(part)
        for key in ("input", "rawInput", "output", "errorText"):
            part.pop(key, None)
        part.update({k: v for k, v in fields.items() if v is not None})

    def _data(self, chunk: Chunk) -> None:
        ident = chunk.get("id")
        if ident is not None:
            for part in self.parts:
                if part.get("type") == chunk["type"] and part.get("id") == ident:
                    part["data"] = chunk.get("data")
                    return
        part = {"type": chunk["type"], "data": chunk.get("data")}
        if ident is not None:
            part = {"type": chunk["type"], "id": ident, "data": chunk.get("data")}
        self.parts.append(part)


def build_message(message_id: str, chunks: Iterable[Chunk]) -> dict[str, Any]:
    builder = UIMessageBuilder(message_id)
    for chunk in chunks:
        builder.apply(chunk)
    return builder.message
