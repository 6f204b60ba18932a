"""AG-UI events in, Vercel AI SDK UI message stream chunks out: one assistant message per run.

A pure, incremental encoder (no I/O, no clock): `feed` one log event, get the
chunks it becomes; `end` once the log is closed. The chunks are what the AI
SDK's `DefaultChatTransport` validates and `readUIMessageStream` folds
(`ai` 5 to 7; the README has the table and what each major accepts).

    RUN_STARTED (first)             start {messageId, messageMetadata: {runId, threadId}}
    STEP_STARTED / STEP_FINISHED    start-step / finish-step (outermost step only)
    TEXT_MESSAGE_*                  text-start / text-delta / text-end
    REASONING_MESSAGE_*, THINKING_* reasoning-start / reasoning-delta / reasoning-end
    TOOL_CALL_START / ARGS          tool-input-start / tool-input-delta
    TOOL_CALL_END                   tool-input-available (tool-input-error: arguments not JSON)
    TOOL_CALL_RESULT, END.result    tool-output-available
    CUSTOM approval-requested       tool-approval-request (approvals=True), else data-*
    STATE_SNAPSHOT / STATE_DELTA    data-state (the whole state, one part, id "state")
    MESSAGES_SNAPSHOT, CUSTOM       data-messages-snapshot, data-<name>
    RUN_FINISHED.usage              message-metadata {usage}
    RUN_FINISHED                    finish (held until the log ends: an agent loop emits several)
    RUN_ERROR                       error; code "cancelled": abort
    CUSTOM ai-sdk.chunk             the chunk it holds (an AI SDK producer's, whole)
    rawEvent {source: ai-sdk}       its chunk's fields laid over the chunk made for the event

The last two give an AI SDK producer's chunks back as it sent them: its
stream is mapped into the log by `agent_replay.ingest.ui_chunks`.

The client rejects content for a part it never saw start, forgets open text
and reasoning parts at `finish-step`, and appends a delta to its part
wherever that part sits. So parts are closed before a step ends and before a
tool call starts, and content arriving after that opens a new part
(`<messageId>:2`, ...): the message keeps the order the agent streamed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agent_replay.projector.json_patch import PatchError, apply_patch
from agent_replay.projector.jsvalues import MAX_DEPTH, too_deep

Chunk = dict[str, Any]

# The finish reasons every supported major accepts (v5 adds "unknown", v7 "interrupted").
FINISH_REASONS = frozenset({"stop", "length", "content-filter", "tool-calls", "error", "other"})
ACCEPTED = "run.accepted"
APPROVAL = "approval-requested"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def finish_reason(value: Any) -> str | None:
    """AG-UI / provider spellings (`tool_calls`) to the AI SDK's (`tool-calls`)."""
    if not isinstance(value, str):
        return None
    reason = value.replace("_", "-").lower()
    return reason if reason in FINISH_REASONS else "other"


def _json_value(text: str) -> Any:
    """`json.loads`, refusing (ValueError) text nested past MAX_DEPTH: kept as text."""
    if too_deep(text):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return json.loads(text)


def tool_output(content: Any) -> Any:
    """A tool result's content is a string on the wire; JSON text becomes its value."""
    if isinstance(content, str):
        try:
            return _json_value(content)
        except ValueError:
            return content
    return content


# An event mapped from an AI SDK chunk (agent_replay.ingest.ui_chunks) carries the
# chunk's fields it has no place for as rawEvent {"source": "ai-sdk", "chunk": {...}}.
RAW_SOURCE = "ai-sdk"
# The CUSTOM event a chunk with no AG-UI counterpart travels in, whole.
CHUNK_EVENT = "ai-sdk.chunk"


def _raw_chunk(event: Chunk) -> Chunk | None:
    raw = event.get("rawEvent")
    if not isinstance(raw, dict) or raw.get("source") != RAW_SOURCE:
        return None
    chunk = raw.get("chunk")
    return chunk if isinstance(chunk, dict) and isinstance(chunk.get("type"), str) else None


def _lay_over(out: list[Chunk], raw: Chunk) -> None:
    """The producer's own fields over the last chunk of its type the event gave."""
    for chunk in reversed(out):
        if chunk.get("type") == raw["type"]:
            for key, value in raw.items():
                if key == "reason" and value is None:
                    chunk.pop(key, None)  # an abort that gave no reason
                elif key != "type":
                    chunk[key] = value
            return


@dataclass
class _Part:
    """An open text or reasoning part: which segment of the agent's message it is."""

    kind: str  # "text" | "reasoning"
    source: str  # the AG-UI message id
    segment: int
    open: bool = True

    @property
    def id(self) -> str:
        return self.source if self.segment == 1 else f"{self.source}:{self.segment}"


@dataclass
class _Tool:
    name: str
    args: str = ""
    input_done: bool = False
    output_done: bool = False


@dataclass
class UIMessageStreamEncoder:
    """One run's log as one AI SDK assistant message, chunk by chunk."""

    message_id: str
    approvals: bool = False
    started: bool = False
    done: bool = False
    _parts: dict[tuple[str, str], _Part] = field(default_factory=dict)
    _tools: dict[str, _Tool] = field(default_factory=dict)
    _steps: int = 0
    _finish: Chunk | None = None
    _thinking: int = 0
    _state: Any = None

    def feed(self, event: Any) -> list[Chunk]:
        if self.done or not isinstance(event, dict):
            return []
        kind = event.get("type")
        handler = HANDLERS.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return []
        out: list[Chunk] = []
        if kind != "RUN_STARTED" and kind != "RUN_ERROR" and not self.started:
            if kind == "CUSTOM" and event.get("name") == ACCEPTED:
                return []
            out.extend(self._start({}))
        handler(self, event, out)
        raw = _raw_chunk(event)
        if raw is not None:
            _lay_over(out, raw)
        return out

    def end(self) -> list[Chunk]:
        """The log is closed: finish the message (if nothing ended it already)."""
        if self.done:
            return []
        out = [] if self.started else self._start({})
        self._finish_message(out, self._finish or {"type": "finish"})
        return out

    # -- shared moves -----------------------------------------------------

    def _start(self, event: Chunk) -> list[Chunk]:
        self.started = True
        metadata = {k: v for k in ("runId", "threadId") if (v := _str(event.get(k))) is not None}
        chunk: Chunk = {"type": "start", "messageId": self.message_id}
        if metadata:
            chunk["messageMetadata"] = metadata
        return [chunk]

    def _close_parts(self, out: list[Chunk], kind: str | None = None) -> None:
        for part in self._parts.values():
            if part.open and (kind is None or part.kind == kind):
                part.open = False
                out.append({"type": f"{part.kind}-end", "id": part.id})

    def _open(self, out: list[Chunk], kind: str, source: str) -> _Part:
        part = self._parts.get((kind, source))
        if part is not None and part.open:
            return part
        part = _Part(kind, source, 1 if part is None else part.segment + 1)
        self._parts[(kind, source)] = part
        out.append({"type": f"{kind}-start", "id": part.id})
        return part

    def _delta(self, out: list[Chunk], kind: str, source: str, delta: Any) -> None:
        if not isinstance(delta, str) or not delta:
            return
        part = self._open(out, kind, source)
        out.append({"type": f"{kind}-delta", "id": part.id, "delta": delta})

    def _end(self, out: list[Chunk], kind: str, source: str) -> None:
        part = self._parts.get((kind, source))
        if part is not None and part.open:
            part.open = False
            out.append({"type": f"{kind}-end", "id": part.id})

    def _finish_message(self, out: list[Chunk], finish: Chunk) -> None:
        self._close_parts(out)
        if self._steps:
            self._steps = 0
            out.append({"type": "finish-step"})
        out.append(finish)
        self.done = True

    def _data(self, out: list[Chunk], name: str, data: Any, ident: str | None = None) -> None:
        chunk: Chunk = {"type": f"data-{name}", "data": data}
        if ident is not None:
            chunk["id"] = ident
        out.append(chunk)

    # -- events -----------------------------------------------------------

    def _run_started(self, event: Chunk, out: list[Chunk]) -> None:
        # A later iteration of an agent loop: the message goes on.
        self._finish = None
        if not self.started:
            out.extend(self._start(event))

    def _run_finished(self, event: Chunk, out: list[Chunk]) -> None:
        usage = event.get("usage")
        if usage is not None:
            out.append({"type": "message-metadata", "messageMetadata": {"usage": usage}})
        finish: Chunk = {"type": "finish"}
        reason = finish_reason(event.get("finishReason"))
        if reason is not None:
            finish["finishReason"] = reason
        raw = _raw_chunk(event)
        if raw is not None:
            _lay_over([finish], raw)
        self._finish = finish

    def _run_error(self, event: Chunk, out: list[Chunk]) -> None:
        if not self.started:
            out.extend(self._start(event))
        if _raw_chunk(event) is None:
            # An AI SDK producer's error or abort leaves its parts as it left them.
            self._close_parts(out)
        message = _str(event.get("message")) or "the run failed"
        if event.get("code") == "cancelled":
            out.append({"type": "abort", "reason": message})
        else:
            out.append({"type": "error", "errorText": message})
        self.done = True

    def _step_started(self, event: Chunk, out: list[Chunk]) -> None:
        self._steps += 1
        if self._steps == 1:
            out.append({"type": "start-step"})

    def _step_finished(self, event: Chunk, out: list[Chunk]) -> None:
        if self._steps == 0:
            return
        self._steps -= 1
        if self._steps == 0:
            self._close_parts(out)
            out.append({"type": "finish-step"})

    def _message_part(self, kind: str, move: str, event: Chunk, out: list[Chunk]) -> None:
        """A text or reasoning message's start, content or end (`move`)."""
        source = _str(event.get("messageId"))
        if source is None:
            return
        if move == "start":
            # Only the assistant's own text belongs in its message.
            if kind == "reasoning" or event.get("role", "assistant") == "assistant":
                self._open(out, kind, source)
        elif move == "delta":
            self._delta(out, kind, source, event.get("delta"))
        else:
            self._end(out, kind, source)

    # The legacy THINKING_* events carry no id: each message gets one of ours.
    def _thinking_start(self, event: Chunk, out: list[Chunk]) -> None:
        self._thinking += 1
        self._open(out, "reasoning", f"{self.message_id}-thinking-{self._thinking}")

    def _thinking_content(self, event: Chunk, out: list[Chunk]) -> None:
        if self._thinking == 0:
            self._thinking_start(event, out)
        self._delta(
            out, "reasoning", f"{self.message_id}-thinking-{self._thinking}", event.get("delta")
        )

    def _thinking_end(self, event: Chunk, out: list[Chunk]) -> None:
        if self._thinking:
            self._end(out, "reasoning", f"{self.message_id}-thinking-{self._thinking}")

    def _tool_start(self, event: Chunk, out: list[Chunk]) -> None:
        call = _str(event.get("toolCallId"))
        name = _str(event.get("toolCallName")) or _str(event.get("toolName"))
        if call is None or name is None or call in self._tools:
            return
        self._close_parts(out)
        self._tools[call] = _Tool(name)
        out.append({"type": "tool-input-start", "toolCallId": call, "toolName": name})

    def _tool_args(self, event: Chunk, out: list[Chunk]) -> None:
        call = _str(event.get("toolCallId"))
        tool = self._tools.get(call) if call is not None else None
        delta = event.get("delta")
        if tool is None or tool.input_done or not isinstance(delta, str) or not delta:
            return
        tool.args += delta
        out.append({"type": "tool-input-delta", "toolCallId": call, "inputTextDelta": delta})

    def _input_available(
        self, call: str, tool: _Tool, out: list[Chunk], raw: Chunk | None = None
    ) -> None:
        if tool.input_done:
            return
        tool.input_done = True
        if raw is not None and raw["type"] == "tool-input-available" and "input" in raw:
            # The producer's input, where its streamed text does not read as it.
            out.append({"type": "tool-input-available", "toolCallId": call,
                        "toolName": tool.name, "input": raw["input"]})  # fmt: skip
            return
        try:
            value = _json_value(tool.args) if tool.args.strip() else {}
        except ValueError as exc:
            out.append(
                {"type": "tool-input-error", "toolCallId": call, "toolName": tool.name,
                 "input": tool.args, "errorText": f"the tool's arguments are not JSON: {exc}"}
            )  # fmt: skip
            tool.output_done = True
            return
        out.append(
            {"type": "tool-input-available", "toolCallId": call, "toolName": tool.name,
             "input": value}
        )  # fmt: skip

    def _tool_end(self, event: Chunk, out: list[Chunk]) -> None:
        call = _str(event.get("toolCallId"))
        tool = self._tools.get(call) if call is not None else None
        if call is None or tool is None:
            return
        raw = _raw_chunk(event)
        if raw is not None and raw["type"] == "tool-input-error" and not tool.input_done:
            # The producer's own verdict on the input; its fields are laid over.
            tool.input_done = tool.output_done = True
            out.append({"type": "tool-input-error", "toolCallId": call, "toolName": tool.name})
            return
        self._input_available(call, tool, out, raw)
        if "result" in event:
            self._output(call, tool, event["result"], out)

    def _output(
        self, call: str, tool: _Tool, content: Any, out: list[Chunk], raw: Chunk | None = None
    ) -> None:
        if tool.output_done:
            return
        self._input_available(call, tool, out)
        if tool.output_done:  # the input was an error: that is the call's outcome
            return
        # A preliminary output (AI SDK producers) is followed by the call's final one.
        tool.output_done = raw is None or raw.get("preliminary") is not True
        if raw is not None and raw["type"] == "tool-output-error":
            text = content if isinstance(content, str) else ""
            out.append({"type": "tool-output-error", "toolCallId": call, "errorText": text})
            return
        out.append(
            {"type": "tool-output-available", "toolCallId": call, "output": tool_output(content)}
        )

    def _tool_result(self, event: Chunk, out: list[Chunk]) -> None:
        call = _str(event.get("toolCallId"))
        tool = self._tools.get(call) if call is not None else None
        if call is not None and tool is not None:
            self._output(call, tool, event.get("content"), out, _raw_chunk(event))

    def _custom(self, event: Chunk, out: list[Chunk]) -> None:
        name = _str(event.get("name"))
        if name is None or name == ACCEPTED:
            return
        value = event.get("value")
        if name == CHUNK_EVENT:
            if isinstance(value, dict) and _str(value.get("type")) is not None:
                out.append(dict(value))
            return
        # An AI SDK producer's request (it marks it) goes as it sent it: its client takes it.
        approvals = self.approvals or _raw_chunk(event) is not None
        if name == APPROVAL and approvals and isinstance(value, dict):
            call = _str(value.get("toolCallId"))
            approval = value.get("approval")
            ident = _str(approval.get("id")) if isinstance(approval, dict) else None
            if call is not None and ident is not None and call in self._tools:
                out.append(
                    {"type": "tool-approval-request", "approvalId": ident, "toolCallId": call}
                )
                return
        self._data(out, name, value)

    def _state_snapshot(self, event: Chunk, out: list[Chunk]) -> None:
        self._state = event.get("snapshot")
        self._data(out, "state", self._state, "state")

    def _state_delta(self, event: Chunk, out: list[Chunk]) -> None:
        try:
            self._state = apply_patch(self._state, event.get("delta"))
        except PatchError:
            return  # as @ag-ui/client does: a patch that fails leaves the state alone
        self._data(out, "state", self._state, "state")

    def _messages_snapshot(self, event: Chunk, out: list[Chunk]) -> None:
        self._data(out, "messages-snapshot", event.get("messages"), "messages-snapshot")


# Exactly the types the catalog (agent_replay.event_types) gives Reader.AI_SDK.
HANDLERS: dict[str, Any] = {
    "RUN_STARTED": UIMessageStreamEncoder._run_started,
    "RUN_FINISHED": UIMessageStreamEncoder._run_finished,
    "RUN_ERROR": UIMessageStreamEncoder._run_error,
    "STEP_STARTED": UIMessageStreamEncoder._step_started,
    "STEP_FINISHED": UIMessageStreamEncoder._step_finished,
    "THINKING_TEXT_MESSAGE_START": UIMessageStreamEncoder._thinking_start,
    "THINKING_TEXT_MESSAGE_CONTENT": UIMessageStreamEncoder._thinking_content,
    "THINKING_TEXT_MESSAGE_END": UIMessageStreamEncoder._thinking_end,
    "TOOL_CALL_START": UIMessageStreamEncoder._tool_start,
    "TOOL_CALL_ARGS": UIMessageStreamEncoder._tool_args,
    "TOOL_CALL_END": UIMessageStreamEncoder._tool_end,
    "TOOL_CALL_RESULT": UIMessageStreamEncoder._tool_result,
    "CUSTOM": UIMessageStreamEncoder._custom,
    "STATE_SNAPSHOT": UIMessageStreamEncoder._state_snapshot,
    "STATE_DELTA": UIMessageStreamEncoder._state_delta,
    "MESSAGES_SNAPSHOT": UIMessageStreamEncoder._messages_snapshot,
}


def _part_handler(kind: str, move: str) -> Any:
    def handle(encoder: UIMessageStreamEncoder, event: Chunk, out: list[Chunk]) -> None:
        encoder._message_part(kind, move, event, out)

    return handle


for _prefix, _kind in (("TEXT_MESSAGE", "text"), ("REASONING_MESSAGE", "reasoning")):
    for _suffix, _move in (("START", "start"), ("CONTENT", "delta"), ("CHUNK", "delta"),
                           ("END", "end")):  # fmt: skip
        HANDLERS[f"{_prefix}_{_suffix}"] = _part_handler(_kind, _move)
