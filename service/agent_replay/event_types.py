"""The AG-UI event types: one catalog, and which of the service's readers act on each.

Every table keyed by an event type is derived from `CATALOG`: the projector's dispatch
(`projector.handlers`), normalization's spec keys (`projector.normalize`), the AG-UI
encoders' required fields and terminal events (`projector.agui`), the AI SDK encoder
(`projector.ai_sdk`), the run summary (`log.summary`), a hosted run's driver
(`agents.driver`) and the terminal renderer of `agent-replay tail` (`console.render`). An
entry's `readers` say which of them act on the type; each reader's dispatch is checked
against them (tests/test_event_types.py), so a type is added here first, then handled by each reader
it names, and a reader handles no type the catalog does not give it.

The types are those of `@ag-ui/core`'s `EventType` (also checked there); a chunk of any
other type is stored and streamed as it came, and no reader acts on it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Reader(enum.Flag):
    """The code that acts on a type's events; every other type passes it by."""

    NONE = 0
    # projector.handlers: the UI messages a TanStack AI client builds
    PROJECTOR = enum.auto()
    # projector.agui.AguiProjection: the messages and state an @ag-ui/client reducer builds
    AGUI = enum.auto()
    # projector.ai_sdk: the Vercel AI SDK's UI message stream
    AI_SDK = enum.auto()
    # log.summary: a run's summary columns
    SUMMARY = enum.auto()
    # console.render: what `agent-replay tail` writes
    TAIL = enum.auto()


# The keys every AG-UI event may carry (the spec's BaseEvent).
BASE_FIELDS = ("type", "timestamp", "rawEvent", "metadata")


@dataclass(frozen=True, slots=True)
class EventType:
    name: str
    # The top-level keys the AG-UI spec defines for the type, besides BASE_FIELDS.
    fields: tuple[str, ...]
    # The string fields @ag-ui/core's schema requires: without them a client refuses the event.
    required: tuple[str, ...]
    readers: Reader
    # A run's last event: the run is finished or failed.
    terminal: bool = False


_P, _G, _A, _S, _T = Reader.PROJECTOR, Reader.AGUI, Reader.AI_SDK, Reader.SUMMARY, Reader.TAIL
_NONE = Reader.NONE

CATALOG: tuple[EventType, ...] = (
    EventType("TEXT_MESSAGE_START", ("messageId", "role", "name"), ("messageId",), _P | _G | _A),
    EventType("TEXT_MESSAGE_CONTENT", ("messageId", "delta"), ("messageId", "delta"),
              _P | _G | _A | _T),
    EventType("TEXT_MESSAGE_END", ("messageId",), ("messageId",), _P | _G | _A | _T),
    EventType("TEXT_MESSAGE_CHUNK", ("messageId", "role", "delta", "name"), (), _A | _T),
    EventType("TOOL_CALL_START", ("toolCallId", "toolCallName", "parentMessageId"),
              ("toolCallId", "toolCallName"), _P | _G | _A | _S | _T),
    EventType("TOOL_CALL_ARGS", ("toolCallId", "delta"), ("toolCallId", "delta"),
              _P | _G | _A | _T),
    EventType("TOOL_CALL_END", ("toolCallId",), ("toolCallId",), _P | _G | _A | _T),
    EventType("TOOL_CALL_CHUNK", ("toolCallId", "toolCallName", "parentMessageId", "delta"), (),
              _NONE),
    EventType("TOOL_CALL_RESULT", ("messageId", "toolCallId", "content", "role"),
              ("messageId", "toolCallId", "content"), _P | _G | _A | _T),
    EventType("THINKING_START", ("title",), (), _NONE),
    EventType("THINKING_END", (), (), _NONE),
    EventType("THINKING_TEXT_MESSAGE_START", (), (), _A),
    EventType("THINKING_TEXT_MESSAGE_CONTENT", ("delta",), (), _A | _T),
    EventType("THINKING_TEXT_MESSAGE_END", (), (), _A),
    EventType("STATE_SNAPSHOT", ("snapshot",), (), _G | _A),
    EventType("STATE_DELTA", ("delta",), (), _G | _A),
    EventType("MESSAGES_SNAPSHOT", ("messages",), (), _P | _G | _A),
    EventType("ACTIVITY_SNAPSHOT", ("messageId", "activityType", "content", "replace"), (),
              _NONE),
    EventType("ACTIVITY_DELTA", ("messageId", "activityType", "patch"), (), _NONE),
    EventType("RAW", ("event", "source"), (), _NONE),
    EventType("CUSTOM", ("name", "value"), (), _P | _A | _T),
    EventType("RUN_STARTED", ("threadId", "runId", "parentRunId", "input"), (), _P | _G | _A),
    EventType("RUN_FINISHED", ("threadId", "runId", "result", "outcome", "usage"), (),
              _P | _G | _A | _S, terminal=True),
    EventType("RUN_ERROR", ("message", "code", "usage"), (), _P | _G | _A | _S | _T,
              terminal=True),
    EventType("STEP_STARTED", ("stepName",), ("stepName",), _P | _G | _A),
    # TAIL: legacy thinking steps carry their text on STEP_FINISHED.
    EventType("STEP_FINISHED", ("stepName",), ("stepName",), _P | _G | _A | _T),
    EventType("REASONING_START", ("messageId",), ("messageId",), _G),
    EventType("REASONING_MESSAGE_START", ("messageId", "role"), ("messageId",), _G | _A),
    EventType("REASONING_MESSAGE_CONTENT", ("messageId", "delta"), ("messageId", "delta"),
              _P | _G | _A | _T),
    EventType("REASONING_MESSAGE_END", ("messageId",), ("messageId",), _G | _A),
    EventType("REASONING_MESSAGE_CHUNK", ("messageId", "delta"), (), _A | _T),
    EventType("REASONING_END", ("messageId",), ("messageId",), _G),
    EventType("REASONING_ENCRYPTED_VALUE", ("subtype", "entityId", "encryptedValue"), (), _P),
)  # fmt: skip

BY_NAME: dict[str, EventType] = {t.name: t for t in CATALOG}
TERMINAL = frozenset(t.name for t in CATALOG if t.terminal)


def read_by(reader: Reader) -> frozenset[str]:
    """The types `reader` acts on."""
    return frozenset(t.name for t in CATALOG if reader in t.readers)
