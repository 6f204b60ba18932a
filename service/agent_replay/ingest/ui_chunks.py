"""AI SDK UI message stream chunks in, AG-UI events out: the one mapping for AI SDK producers.

A hosted agent with `"protocol": "ai-sdk"` (`agent_replay.agents.wire`) and a
direct append with `?format=ai-sdk` (`agent_replay.api.runs`) both feed the
chunks an `ai` 5, 6 or 7 server writes (`toUIMessageStreamResponse`) through
`UIChunkMapper`, so the log holds AG-UI events every client family reads.
The service's AI SDK encoder (`agent_replay.projector.ai_sdk`) turns them back
into the chunks the producer sent; docs/guides/ai-sdk.md has the table.

    start                       RUN_STARTED (before the first chunk, whichever it is);
                                its messageMetadata: CUSTOM ai-sdk.chunk
    start-step / finish-step    STEP_STARTED / STEP_FINISHED (stepName "step")
    text-start/-delta/-end      TEXT_MESSAGE_START / _CONTENT / _END (messageId = the part id)
    reasoning-start/-delta/-end REASONING_MESSAGE_START / _CONTENT / _END
    tool-input-start / -delta   TOOL_CALL_START / TOOL_CALL_ARGS
    tool-input-available        TOOL_CALL_END (START and ARGS first if the input was not streamed)
    tool-input-error            TOOL_CALL_END, its rawEvent chunk {type: tool-input-error, ...}
    tool-output-available       TOOL_CALL_RESULT (content: the output as JSON text)
    tool-output-error           TOOL_CALL_RESULT (content: the error text), rawEvent names it
    tool-approval-request       CUSTOM approval-requested {toolCallId, approval: {id}}, marked
    data-<name>                 CUSTOM <name> (value: data)
    finish                      RUN_FINISHED {finishReason}
    error / abort               RUN_ERROR {message} / RUN_ERROR {message, code: cancelled},
                                marked (the encoder leaves the producer's open parts open)
    anything else               CUSTOM ai-sdk.chunk (value: the chunk whole)

A chunk's fields its AG-UI event has no place for go into the event's
`rawEvent` (AG-UI's field for "the event this one was transformed from") as
`{"source": "ai-sdk", "chunk": {type: <chunk type>, ...those fields}}`; the
encoder lays them over the chunk of that type it makes for the event. A
field is put there only where the event alone would not give it back, so the
common chunk (a text delta) costs nothing more.

State: whether the run started (the first chunk gives RUN_STARTED, whatever
it is: `createUIMessageStream` writes data parts before `start`), which tool
calls started and the input text streamed for each (a
`tool-input-available` either follows its streamed input or stands alone).
`observe` seeds it from AG-UI events already in the log. After a terminal
chunk (`finish`, `error`, `abort`) this mapper maps nothing more: a hosted
run has ended there. (A run's end is its close: a later append to a pushed
run starts a new mapper, which maps on, as an AG-UI agent loop goes on.)
Pure: standard library only, ids and times come from the producer.
"""

from __future__ import annotations

import json
from typing import Any

from agent_replay.errors import InvalidEvent

Event = dict[str, Any]

# The CUSTOM event a chunk with no AG-UI counterpart travels in, whole.
CHUNK_EVENT = "ai-sdk.chunk"
# CUSTOM names the encoder reads as something else: a data part named so goes whole.
_RESERVED = frozenset({CHUNK_EVENT, "run.accepted", "approval-requested"})
STEP_NAME = "step"
# rawEvent {"source": RAW_SOURCE, "chunk": {...}}: what the encoder lays over its chunk.
RAW_SOURCE = "ai-sdk"
# The finish reasons the encoder sends as they are (ai 5, 6 and 7 all accept them).
_FINISH_REASONS = frozenset({"stop", "length", "content-filter", "tool-calls", "error", "other"})
# Of a tool-input-available's fields, those its tool-input-start takes too.
_START_FIELDS = ("providerExecuted", "providerMetadata", "toolMetadata", "dynamic", "title")

# Per chunk type: the fields the AG-UI event carries (the rest go into rawEvent).
_CARRIED: dict[str, frozenset[str]] = {
    "text-start": frozenset({"id"}),
    "text-delta": frozenset({"id", "delta"}),
    "text-end": frozenset({"id"}),
    "reasoning-start": frozenset({"id"}),
    "reasoning-delta": frozenset({"id", "delta"}),
    "reasoning-end": frozenset({"id"}),
    "tool-input-start": frozenset({"toolCallId", "toolName"}),
    "tool-input-delta": frozenset({"toolCallId", "inputTextDelta"}),
    "tool-input-available": frozenset({"toolCallId", "toolName", "input"}),
    "tool-input-error": frozenset({"toolCallId", "toolName"}),
    "tool-output-available": frozenset({"toolCallId", "output"}),
    "tool-output-error": frozenset({"toolCallId", "errorText"}),
    "tool-approval-request": frozenset({"toolCallId", "approvalId"}),
    "start": frozenset({"messageId", "messageMetadata"}),
    "finish": frozenset({"finishReason", "messageMetadata"}),
    "start-step": frozenset(),
    "finish-step": frozenset(),
    "error": frozenset({"errorText"}),
    "abort": frozenset({"reason"}),
}
_STARTS = {"TEXT_MESSAGE_START": "text", "REASONING_MESSAGE_START": "reasoning"}
_PART_EVENTS = {
    "text": ("TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"),
    "reasoning": ("REASONING_MESSAGE_START", "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END"),
}


def raw_event(kind: str, fields: dict[str, Any]) -> Event:
    """The `rawEvent` of an event mapped from a chunk of type `kind`: the fields it lacks."""
    return {"source": RAW_SOURCE, "chunk": {"type": kind, **fields}}


def _raw_fields(event: Event, kind: str) -> dict[str, Any]:
    """The chunk fields `event`'s rawEvent holds (made for chunk type `kind`), to add to."""
    raw = event.get("rawEvent")
    if raw is None:
        raw = event["rawEvent"] = raw_event(kind, {})
    chunk: dict[str, Any] = raw["chunk"]
    return chunk


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _parsed(text: str) -> tuple[bool, Any]:
    """(True, value) when `text` is JSON text, else (False, None)."""
    try:
        return True, json.loads(text)
    except ValueError:
        return False, None


def _string(chunk: Event, key: str, index: int) -> str:
    value = chunk.get(key)
    if not isinstance(value, str) or not value:
        kind = chunk.get("type")
        raise InvalidEvent(f"event {index} ({kind}) needs a non-empty string {key!r}", index=index)
    return value


class UIChunkMapper:
    """One run's UI message stream chunks to its AG-UI events, chunk by chunk."""

    def __init__(self, run_id: str, thread_id: str) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.started = False  # RUN_STARTED given
        self.ended = False
        # The tool calls started, and the input text streamed for each.
        self._args: dict[str, str] = {}
        # Text and reasoning parts: the (kind, message id)s started, and the current
        # message id of each (kind, the producer's id).
        self._seen: set[tuple[str, str]] = set()
        self._names: dict[tuple[str, str], str] = {}

    def calls(self) -> set[Any]:
        """The tool calls started so far."""
        return set(self._args)

    def observe(self, event: Event) -> None:
        """An AG-UI event already in the run's log (seeding a mapper made for an append)."""
        kind = event.get("type")
        call = event.get("toolCallId")
        if kind == "TOOL_CALL_START" and isinstance(call, str):
            self._args.setdefault(call, "")
        elif kind == "TOOL_CALL_ARGS" and isinstance(call, str) and call in self._args:
            delta = event.get("delta")
            self._args[call] += delta if isinstance(delta, str) else ""
        elif kind == "RUN_STARTED":
            self.started = True
        elif kind in _STARTS and isinstance(event.get("messageId"), str):
            self._seen.add((_STARTS[kind], event["messageId"]))

    def feed(self, chunk: Any, index: int = 0) -> list[Event]:
        """The AG-UI events `chunk` becomes (InvalidEvent when it is no UI chunk)."""
        if not isinstance(chunk, dict):
            raise InvalidEvent(f"event {index} is not a JSON object", index=index)
        kind = chunk.get("type")
        if not isinstance(kind, str) or not kind:
            raise InvalidEvent(f"event {index} has no non-empty string 'type'", index=index)
        if self.ended:
            return []
        if not self.started and kind != "start":
            # AG-UI readers want RUN_STARTED first; a data part may come before `start`.
            return [*self._start({"type": "start"}, index), *self.feed(chunk, index)]
        part = kind.partition("-")[0]
        if part in _PART_EVENTS and kind in _CARRIED:
            return self._part(part, chunk, index)
        if kind.startswith("data-") and len(kind) > 5 and kind[5:] not in _RESERVED:
            return [self._with_raw({"type": "CUSTOM", "name": kind[5:],
                                    "value": chunk.get("data")}, chunk, {"data"})]  # fmt: skip
        handler = _HANDLERS.get(kind)
        if handler is None:
            return [{"type": "CUSTOM", "name": CHUNK_EVENT, "value": chunk}]
        events: list[Event] = handler(self, chunk, index)
        return events

    # -- helpers ----------------------------------------------------------

    @staticmethod
    def _with_raw(event: Event, chunk: Event, carried: frozenset[str] | set[str]) -> Event:
        extra = {k: v for k, v in chunk.items() if k != "type" and k not in carried}
        if extra:
            event["rawEvent"] = raw_event(chunk["type"], extra)
        return event

    def _mapped(self, event: Event, chunk: Event) -> Event:
        return self._with_raw(event, chunk, _CARRIED[chunk["type"]])

    def _part(self, part: str, chunk: Event, index: int) -> list[Event]:
        start, content, end = _PART_EVENTS[part]
        given = _string(chunk, "id", index)
        kind = chunk["type"]
        if kind.endswith("-start"):
            ident = self._named(part, given)
            role = "assistant" if part == "text" else "reasoning"
            return [self._mapped({"type": start, "messageId": ident, "role": role}, chunk)]
        ident = self._names.get((part, given), given)
        if kind.endswith("-end"):
            return [self._mapped({"type": end, "messageId": ident}, chunk)]
        delta = chunk.get("delta")
        if not isinstance(delta, str):
            raise InvalidEvent(f"event {index} ({kind}) needs a string 'delta'", index=index)
        if not delta:
            return []  # an empty delta adds nothing; AG-UI refuses it
        return [self._mapped({"type": content, "messageId": ident, "delta": delta}, chunk)]

    def _named(self, part: str, given: str) -> str:
        """The AG-UI message id of a part starting as `given`. Providers number a step's
        parts from 0 (Anthropic's "0", "1"), so a later step starts "0" again: an AG-UI
        message is one per id, so the second becomes "0:2" (the AI SDK client never shows
        a text or reasoning part's id, and the encoder names such a part so anyway)."""
        ident, uses = given, 1
        while (part, ident) in self._seen:
            uses += 1
            ident = f"{given}:{uses}"
        self._seen.add((part, ident))
        self._names[part, given] = ident
        return ident

    def _metadata(self, chunk: Event) -> list[Event]:
        if "messageMetadata" not in chunk or chunk["messageMetadata"] is None:
            return []
        value = {"type": "message-metadata", "messageMetadata": chunk["messageMetadata"]}
        return [{"type": "CUSTOM", "name": CHUNK_EVENT, "value": value}]

    # -- chunks -----------------------------------------------------------

    def _start(self, chunk: Event, index: int) -> list[Event]:
        if self.started:  # begun by a chunk before it: only its metadata is news
            return self._metadata(chunk)
        self.started = True
        started = {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id}
        return [self._mapped(started, chunk), *self._metadata(chunk)]

    def _finish(self, chunk: Event, index: int) -> list[Event]:
        self.ended = True
        event: Event = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        reason = chunk.get("finishReason")
        if isinstance(reason, str) and reason in _FINISH_REASONS:
            event["finishReason"] = reason
        self._mapped(event, chunk)
        if reason is not None and "finishReason" not in event:
            _raw_fields(event, "finish")["finishReason"] = reason
        return [*self._metadata(chunk), event]

    def _step(self, chunk: Event, index: int) -> list[Event]:
        kind = "STEP_STARTED" if chunk["type"] == "start-step" else "STEP_FINISHED"
        return [self._mapped({"type": kind, "stepName": STEP_NAME}, chunk)]

    def _error(self, chunk: Event, index: int) -> list[Event]:
        self.ended = True
        text = chunk.get("errorText")
        message = text if isinstance(text, str) and text else "the run failed"
        event = self._mapped({"type": "RUN_ERROR", "message": message}, chunk)
        # Always marked: the encoder then leaves open parts open, as the producer did.
        fields = _raw_fields(event, "error")
        if isinstance(text, str) and message != text:
            fields["errorText"] = text
        return [event]

    def _abort(self, chunk: Event, index: int) -> list[Event]:
        self.ended = True
        reason = chunk.get("reason")
        message = reason if isinstance(reason, str) and reason else "aborted"
        event = self._mapped({"type": "RUN_ERROR", "message": message, "code": "cancelled"}, chunk)
        _raw_fields(event, "abort")  # marked, as an error is
        if message != reason:
            # The abort had no reason: the encoder gives none back.
            _raw_fields(event, "abort")["reason"] = reason
        return [event]

    def _tool_start(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        name = _string(chunk, "toolName", index)
        if call in self._args:
            return []  # started already: AG-UI starts a call once
        self._args[call] = ""
        return [self._mapped({"type": "TOOL_CALL_START", "toolCallId": call,
                              "toolCallName": name}, chunk)]  # fmt: skip

    def _tool_delta(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        delta = chunk.get("inputTextDelta")
        if not isinstance(delta, str):
            raise InvalidEvent(
                f"event {index} (tool-input-delta) needs a string 'inputTextDelta'", index=index
            )
        if call not in self._args or not delta:
            return []  # the client drops a delta of a call it never saw start
        self._args[call] += delta
        return [self._mapped({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": delta},
                             chunk)]  # fmt: skip

    def _started(self, chunk: Event, index: int, args: str) -> list[Event]:
        """A call's TOOL_CALL_START (and its whole input) when it never streamed."""
        call = _string(chunk, "toolCallId", index)
        if call in self._args:
            return []
        name = _string(chunk, "toolName", index)
        self._args[call] = args
        start: Event = {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": name}
        extra = {k: chunk[k] for k in _START_FIELDS if k in chunk}
        if extra:
            start["rawEvent"] = raw_event("tool-input-start", extra)
        events = [start]
        if args:
            events.append({"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": args})
        return events

    def _input_available(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        value = chunk.get("input")
        events = self._started(chunk, index, _canonical(value) if "input" in chunk else "")
        args = self._args[call]
        ok, parsed = _parsed(args) if args.strip() else (True, {})
        end = self._mapped({"type": "TOOL_CALL_END", "toolCallId": call}, chunk)
        if not ok or _canonical(parsed) != _canonical(value):
            # The input is not the streamed text read as JSON: it goes as it is.
            _raw_fields(end, "tool-input-available")["input"] = value
        return [*events, end]

    def _input_error(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        events = self._started(chunk, index, "")
        end = self._mapped({"type": "TOOL_CALL_END", "toolCallId": call}, chunk)
        _raw_fields(end, "tool-input-error")
        return [*events, end]

    def _result(self, chunk: Event, call: str, content: str) -> Event:
        return self._mapped({"type": "TOOL_CALL_RESULT", "messageId": f"{call}-result",
                             "toolCallId": call, "content": content, "role": "tool"},
                            chunk)  # fmt: skip

    def _output(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        output = chunk.get("output")
        if not isinstance(output, str):
            return [self._result(chunk, call, _canonical(output))]
        event = self._result(chunk, call, output)
        if _parsed(output)[0]:
            # JSON text as content is read back as its value: this one was a string.
            _raw_fields(event, "tool-output-available")["output"] = output
        return [event]

    def _output_error(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        text = chunk.get("errorText")
        event = self._result(chunk, call, text if isinstance(text, str) else "")
        _raw_fields(event, "tool-output-error")
        return [event]

    def _approval(self, chunk: Event, index: int) -> list[Event]:
        call = _string(chunk, "toolCallId", index)
        ident = _string(chunk, "approvalId", index)
        value = {"toolCallId": call, "approval": {"id": ident}}
        event = self._mapped({"type": "CUSTOM", "name": "approval-requested", "value": value},
                             chunk)  # fmt: skip
        # Marked: the encoder sends the request to any client (its producer's majors take it).
        _raw_fields(event, "tool-approval-request")
        return [event]


_HANDLERS: dict[str, Any] = {
    "start": UIChunkMapper._start,
    "finish": UIChunkMapper._finish,
    "start-step": UIChunkMapper._step,
    "finish-step": UIChunkMapper._step,
    "error": UIChunkMapper._error,
    "abort": UIChunkMapper._abort,
    "tool-input-start": UIChunkMapper._tool_start,
    "tool-input-delta": UIChunkMapper._tool_delta,
    "tool-input-available": UIChunkMapper._input_available,
    "tool-input-error": UIChunkMapper._input_error,
    "tool-output-available": UIChunkMapper._output,
    "tool-output-error": UIChunkMapper._output_error,
    "tool-approval-request": UIChunkMapper._approval,
}


# The AG-UI events of a run's log a mapper made for an append observes, when it needs them.
HISTORY_EVENTS = ("TEXT_MESSAGE_START", "REASONING_MESSAGE_START", "TOOL_CALL_START",
                  "TOOL_CALL_ARGS")  # fmt: skip
# The chunks whose mapping depends on the call's earlier chunks (whether its input streamed).
_HISTORY_TYPES = frozenset({"tool-input-delta", "tool-input-available", "tool-input-error"})
# The chunks whose mapping depends on the part ids started before (one message per id).
_PART_STARTS = frozenset({"text-start", "reasoning-start"})


def needs_history(chunks: list[Any], mapper: UIChunkMapper) -> bool:
    """Whether mapping `chunks` (one append's) needs the run's earlier parts and tool
    calls (its events of `HISTORY_EVENTS`, for `observe`): a part starts (its id may
    have been used), or a tool chunk names a call they do not start. Most appends
    (deltas) need none."""
    started = mapper.calls()
    for chunk in chunks:
        if not isinstance(chunk, dict):
            continue
        call, kind = chunk.get("toolCallId"), chunk.get("type")
        if kind == "tool-input-start":
            started.add(call)
        elif kind in _PART_STARTS or (kind in _HISTORY_TYPES and call not in started):
            return True
    return False
