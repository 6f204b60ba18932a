"""A hosted run's AI SDK upstream: the chat request `useChat` would post, and its answer.

An agent with `"protocol": "ai-sdk"` is an AI SDK chat endpoint (a Next.js
route answering `streamText(...).toUIMessageStreamResponse()`). The run posts
it what the stock `DefaultChatTransport` posts, `{id, messages, trigger,
messageId?, ...body}`, and reads its UI message stream, each chunk mapped into
AG-UI events by `agent_replay.ingest.ui_chunks` (one mapper per run) and checked
by ingest like any event.

The request: a run started through `POST /v1/ai-sdk/{agent}` keeps the
transport's own body in its input (`aiSdkRequest`), sent as it came (the chat
id is the run's thread). Any other run (AG-UI's `RunAgentInput`) is put as
that body would be: its messages as `UIMessage`s (text parts; an assistant's
tool calls as tool parts, with their results), `trigger: "submit-message"`,
and its `forwardedProps`, `tools`, `context` and `state` as the body's other
fields.
"""

from __future__ import annotations

import json
from typing import Any

from agent_replay.agents.catalog import RunInput
from agent_replay.ingest import Limits, chunk_from_value
from agent_replay.ingest.ui_chunks import UIChunkMapper
from agent_replay.log.chunks import loads
from agent_replay.log.values import StoredChunk

# The run input's key for the transport's own body (`agent_replay.api.ai_sdk`).
REQUEST_KEY = "aiSdkRequest"
# What the AI SDK's server writes after its last chunk.
_DONE = "[DONE]"


def _value(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def ui_messages(messages: Any) -> list[dict[str, Any]]:
    """AG-UI messages as the AI SDK `UIMessage`s a chat endpoint reads."""
    out: list[dict[str, Any]] = []
    tool_parts: dict[str, dict[str, Any]] = {}
    for index, message in enumerate(messages if isinstance(messages, list) else []):
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        ident = message.get("id") if isinstance(message.get("id"), str) else f"m-{index}"
        content = message.get("content")
        if role == "tool":
            part = tool_parts.get(message.get("toolCallId"))  # type: ignore[arg-type]
            if part is not None:
                part["state"], part["output"] = "output-available", _value(content)
            continue
        if role not in ("user", "system", "assistant"):
            continue
        parts: list[dict[str, Any]] = []
        if isinstance(content, str) and content:
            parts.append({"type": "text", "text": content})
        elif isinstance(content, list):  # multimodal content: its text
            parts += [{"type": "text", "text": c["text"]} for c in content
                      if isinstance(c, dict) and isinstance(c.get("text"), str)]  # fmt: skip
        for call in message.get("toolCalls") or [] if role == "assistant" else []:
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict) or not isinstance(call.get("id"), str):
                continue
            arguments = _value(function.get("arguments"))
            part = {"type": f"tool-{function.get('name')}", "toolCallId": call["id"],
                    "state": "input-available", "input": arguments}  # fmt: skip
            tool_parts[call["id"]] = part
            parts.append(part)
        out.append({"id": ident, "role": role, "parts": parts})
    return out


def chat_request(run_input: RunInput) -> dict[str, Any]:
    """The body to post an AI SDK chat endpoint for `run_input`."""
    thread = run_input.get("threadId")
    kept = run_input.get(REQUEST_KEY)
    if isinstance(kept, dict):
        return {**kept, "id": thread}
    body: dict[str, Any] = {}
    props = run_input.get("forwardedProps")
    if isinstance(props, dict):
        body.update(props)
    for key in ("tools", "context", "state"):
        value = run_input.get(key)
        if value:  # the run's defaults ([] and {}) are nothing a chat endpoint asked for
            body[key] = value
    body.update(
        id=thread, messages=ui_messages(run_input.get("messages")), trigger="submit-message"
    )
    return body


class UIStream:
    """One run's UI message stream chunks (the texts of its SSE `data:` fields) to the
    log's chunks: mapped, then checked by ingest as any event is."""

    __slots__ = ("_limits", "_mapper")

    def __init__(self, run_input: RunInput, limits: Limits) -> None:
        run, thread = run_input.get("runId"), run_input.get("threadId")
        self._mapper = UIChunkMapper(str(run), str(thread))
        self._limits = limits

    def chunks(self, text: str, index: int) -> list[StoredChunk]:
        """The log's chunks for one UI chunk's text (raises ingest's `InvalidInput`)."""
        if text.strip() == _DONE:
            return []
        value = loads(text)
        return [chunk_from_value(e, index, self._limits) for e in self._mapper.feed(value, index)]
