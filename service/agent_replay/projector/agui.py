"""AG-UI for AG-UI clients: a hosted run's log as a sequence `@ag-ui/client` accepts.

Two pure pieces for `POST /v1/agents/{agent}/ag-ui` and `?compact=snapshot`:

* `AguiRelay` passes the log on as it is, but for what `HttpAgent`'s verifier
  rejects: the service's own `CUSTOM run.accepted` (logged before
  `RUN_STARTED`) and anything else ahead of the first `RUN_STARTED`.
* `AguiProjection` folds the log into AG-UI messages and state as
  `@ag-ui/client`'s default reducer does, remembering which messages, tool
  calls, reasoning spans and steps are still open. `prefix()` is a fresh
  client's way in at that point: `RUN_STARTED`, `MESSAGES_SNAPSHOT` (the
  run's input conversation plus everything streamed so far, open messages with
  their content so far), `STATE_SNAPSHOT` where there is state, then a start
  event for each entity still open, so the live events that follow are valid.
  The reducer reuses a message or tool call it already holds on a repeated
  start, so content continues where the snapshot left it.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent_replay.event_types import CATALOG, TERMINAL
from agent_replay.projector.json_patch import PatchError, apply_patch

Event = dict[str, Any]
ACCEPTED = "run.accepted"


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# An event without the string fields @ag-ui/core's schema requires is one the client
# refuses, so neither piece passes it on.
_REQUIRED: dict[str, tuple[str, ...]] = {t.name: t.required for t in CATALOG if t.required}


def well_formed(event: Any) -> bool:
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return False
    if not all(isinstance(event.get(k), str) for k in _REQUIRED.get(event["type"], ())):
        return False
    if event["type"] == "MESSAGES_SNAPSHOT":
        wire = event.get("messages")
        return isinstance(wire, list) and all(
            isinstance(m, dict) and isinstance(m.get("id"), str) for m in wire
        )
    return True


@dataclass
class AguiRelay:
    """The live part: events as logged, minus what comes before the run starts."""

    started: bool = False

    def feed(self, event: Any) -> list[Event]:
        if not well_formed(event):
            return []
        kind = event.get("type")
        if kind == "CUSTOM" and event.get("name") == ACCEPTED:
            return []
        if not self.started:
            if kind not in ("RUN_STARTED", "RUN_ERROR"):
                return []
            self.started = True
        return [event]


@dataclass
class AguiProjection:
    """AG-UI messages and state as the client's reducer builds them, plus what is open."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    state: Any = None
    run_started: Event | None = None
    terminal: Event | None = None
    _open_messages: dict[str, Event] = field(default_factory=dict)  # id -> its start event
    _open_reasoning: dict[str, Event] = field(default_factory=dict)
    _open_spans: dict[str, Event] = field(default_factory=dict)
    _open_tools: dict[str, Event] = field(default_factory=dict)
    _open_steps: dict[str, Event] = field(default_factory=dict)

    @classmethod
    def for_input(cls, run_input: Any) -> AguiProjection:
        """Starting from the run's `RunAgentInput`: its conversation and state."""
        projection = cls()
        if isinstance(run_input, dict):
            wire = run_input.get("messages")
            if isinstance(wire, list):
                projection.messages = [copy.deepcopy(m) for m in wire if isinstance(m, dict)]
            state = run_input.get("state")
            if state not in (None, {}):
                projection.state = copy.deepcopy(state)
        return projection

    def _find(self, ident: str) -> dict[str, Any] | None:
        return next((m for m in self.messages if m.get("id") == ident), None)

    def _owner(self, call: str) -> dict[str, Any] | None:
        for message in self.messages:
            calls = message.get("toolCalls")
            if isinstance(calls, list) and any(c.get("id") == call for c in calls):
                return message
        return None

    def _tool_call(self, call: str) -> dict[str, Any] | None:
        owner = self._owner(call)
        if owner is None:
            return None
        found: dict[str, Any] = next(c for c in owner["toolCalls"] if c.get("id") == call)
        return found

    def apply(self, event: Any) -> None:
        if not well_formed(event):
            return
        step = APPLY.get(event["type"])
        if step is not None:
            step(self, event)

    def _run_started(self, event: Event) -> None:
        self.run_started, self.terminal = event, None
        self._open_messages.clear()
        self._open_reasoning.clear()
        self._open_spans.clear()
        self._open_tools.clear()
        self._open_steps.clear()

    def _run_ended(self, event: Event) -> None:
        self.terminal = event

    def _step_started(self, event: Event) -> None:
        if name := _str(event.get("stepName")):
            self._open_steps[name] = event

    def _step_finished(self, event: Event) -> None:
        if name := _str(event.get("stepName")):
            self._open_steps.pop(name, None)

    def _text_start(self, event: Event) -> None:
        self._message_start(event, reasoning=False)

    def _reasoning_start(self, event: Event) -> None:
        self._message_start(event, reasoning=True)

    def _content(self, event: Event) -> None:
        target = self._find(str(event.get("messageId")))
        delta = event.get("delta")
        if target is not None and isinstance(delta, str):
            target["content"] = f"{target.get('content') or ''}{delta}"

    def _text_end(self, event: Event) -> None:
        self._open_messages.pop(str(event.get("messageId")), None)

    def _reasoning_end(self, event: Event) -> None:
        self._open_reasoning.pop(str(event.get("messageId")), None)

    def _span_start(self, event: Event) -> None:
        if ident := _str(event.get("messageId")):
            self._open_spans[ident] = event

    def _span_end(self, event: Event) -> None:
        self._open_spans.pop(str(event.get("messageId")), None)

    def _tool_args(self, event: Event) -> None:
        call = self._tool_call(str(event.get("toolCallId")))
        delta = event.get("delta")
        if call is not None and isinstance(delta, str):
            call["function"]["arguments"] += delta

    def _tool_end(self, event: Event) -> None:
        self._open_tools.pop(str(event.get("toolCallId")), None)

    def _state_snapshot(self, event: Event) -> None:
        self.state = copy.deepcopy(event.get("snapshot"))

    def _state_delta(self, event: Event) -> None:
        # The client keeps its state when a patch fails.
        with contextlib.suppress(PatchError):
            self.state = apply_patch(self.state, event.get("delta"))

    def _message_start(self, event: Event, reasoning: bool) -> None:
        ident = _str(event.get("messageId"))
        if ident is None:
            return
        (self._open_reasoning if reasoning else self._open_messages)[ident] = event
        if self._find(ident) is None:
            message: dict[str, Any] = {
                "id": ident,
                "role": "reasoning" if reasoning else (event.get("role") or "assistant"),
                "content": "",
            }
            if not reasoning and event.get("name") is not None:
                message["name"] = event["name"]
            self.messages.append(message)

    def _tool_start(self, event: Event) -> None:
        call = _str(event.get("toolCallId"))
        if call is None:
            return
        self._open_tools[call] = event
        existing = self._tool_call(call)
        if existing is not None:
            existing["function"]["name"] = event.get("toolCallName")
            return
        parent = _str(event.get("parentMessageId"))
        target = self._find(parent) if parent else None
        if target is None or target.get("role") != "assistant":
            ident = call if (parent is None or target is not None) else parent
            target = {"id": ident, "role": "assistant", "toolCalls": []}
            self.messages.append(target)
        target.setdefault("toolCalls", []).append(
            {"id": call, "type": "function",
             "function": {"name": event.get("toolCallName"), "arguments": ""}}
        )  # fmt: skip

    def _tool_result(self, event: Event) -> None:
        call = event.get("toolCallId")
        message: dict[str, Any] = {
            "id": event.get("messageId"), "toolCallId": call,
            "role": event.get("role") or "tool", "content": event.get("content"),
        }  # fmt: skip
        owner = self._owner(str(call))
        if owner is None:
            self.messages.append(message)
            return
        at = self.messages.index(owner) + 1
        while at < len(self.messages) and self.messages[at].get("role") == "tool":
            at += 1
        self.messages.insert(at, message)

    def _messages_snapshot(self, event: Event) -> None:
        wire = event.get("messages")
        if not isinstance(wire, list):
            return
        incoming = [copy.deepcopy(m) for m in wire if isinstance(m, dict)]
        by_id = {m.get("id"): m for m in incoming}
        has_reasoning = any(m.get("role") == "reasoning" for m in incoming)
        kept = [
            by_id.get(m.get("id"), m)
            for m in self.messages
            if m.get("id") in by_id or (m.get("role") == "reasoning" and not has_reasoning)
        ]
        seen = {m.get("id") for m in kept}
        self.messages = kept + [m for m in incoming if m.get("id") not in seen]

    def prefix(self) -> list[Event]:
        """A fresh client's way in at this point of the log ([] before the run started)."""
        if self.run_started is None:
            return [self.terminal] if self.terminal is not None else []
        out: list[Event] = [
            dict(self.run_started),
            {"type": "MESSAGES_SNAPSHOT", "messages": copy.deepcopy(self.messages)},
        ]
        if self.state is not None:
            out.append({"type": "STATE_SNAPSHOT", "snapshot": copy.deepcopy(self.state)})
        if self.terminal is not None:
            out.append(dict(self.terminal))
            return out
        out.extend({"type": "STEP_STARTED", "stepName": name} for name in self._open_steps)
        out.extend({"type": "REASONING_START", "messageId": m} for m in self._open_spans)
        for ident, start in self._open_messages.items():
            fresh = {"type": "TEXT_MESSAGE_START", "messageId": ident}
            if start.get("role") is not None:
                fresh["role"] = start["role"]
            out.append(fresh)
        for ident in self._open_reasoning:
            out.append({"type": "REASONING_MESSAGE_START", "messageId": ident, "role": "reasoning"})
        for call, start in self._open_tools.items():
            tool: Event = {"type": "TOOL_CALL_START", "toolCallId": call,
                           "toolCallName": start.get("toolCallName")}  # fmt: skip
            if start.get("parentMessageId") is not None:
                tool["parentMessageId"] = start["parentMessageId"]
            out.append(tool)
        return out


# What each type the catalog (agent_replay.event_types) gives Reader.AGUI does to the projection.
APPLY: dict[str, Callable[[AguiProjection, Event], None]] = {
    "RUN_STARTED": AguiProjection._run_started,
    **dict.fromkeys(TERMINAL, AguiProjection._run_ended),
    "STEP_STARTED": AguiProjection._step_started,
    "STEP_FINISHED": AguiProjection._step_finished,
    "TEXT_MESSAGE_START": AguiProjection._text_start,
    "REASONING_MESSAGE_START": AguiProjection._reasoning_start,
    "TEXT_MESSAGE_CONTENT": AguiProjection._content,
    "REASONING_MESSAGE_CONTENT": AguiProjection._content,
    "TEXT_MESSAGE_END": AguiProjection._text_end,
    "REASONING_MESSAGE_END": AguiProjection._reasoning_end,
    "REASONING_START": AguiProjection._span_start,
    "REASONING_END": AguiProjection._span_end,
    "TOOL_CALL_START": AguiProjection._tool_start,
    "TOOL_CALL_ARGS": AguiProjection._tool_args,
    "TOOL_CALL_END": AguiProjection._tool_end,
    "TOOL_CALL_RESULT": AguiProjection._tool_result,
    "STATE_SNAPSHOT": AguiProjection._state_snapshot,
    "STATE_DELTA": AguiProjection._state_delta,
    "MESSAGES_SNAPSHOT": AguiProjection._messages_snapshot,
}


@dataclass
class AguiResume:
    """A join after an offset, for a client that knows nothing: `skip` the events it
    does not get, then `begin` (the prefix) and `feed` the rest. A join before the run
    started gets its prefix with the first RUN_STARTED instead, so it still learns the
    input conversation."""

    projection: AguiProjection
    relay: AguiRelay = field(default_factory=AguiRelay)

    def skip(self, event: Any) -> None:
        self.projection.apply(event)

    def begin(self) -> list[Event]:
        prefix = self.projection.prefix()
        self.relay.started = bool(prefix)
        return prefix

    def feed(self, event: Any) -> list[Event]:
        if self.relay.started:
            return self.relay.feed(event)
        self.projection.apply(event)
        if well_formed(event) and event.get("type") in ("RUN_STARTED", "RUN_ERROR"):
            return self.begin()
        return []
