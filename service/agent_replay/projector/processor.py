"""Reducer state and the procedures every handler shares (spec §2, §4, §10).

``StreamState`` is TanStack's ``StreamProcessor`` minus its event handlers:
the message list, the per-message drafts, the routing tables (active set,
tool index, pending rename, pending step, structured set), run bookkeeping,
and the shared moves — resolve a message, write text, upsert a tool call or
a thinking part, complete calls, finalize. Handlers (handlers.py,
tool_handlers.py) are written in terms of these.

Ordered sets are dicts (insertion-ordered, re-adding does not move a key).
Ids go through ``key_of`` so that Python's ``1 == True`` and unhashable ids
behave like JS ``Map`` keys.
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.buffers import StrRef
from agent_replay.projector.draft import MessageDraft, StepDraft, ToolCallDraft
from agent_replay.projector.jsvalues import (
    UNDEF,
    JSONParseError,
    iso_from_ms,
    key_of,
    parse_json,
    to_string,
    trim,
    truthy,
)
from agent_replay.projector.model import Message
from agent_replay.projector.updaters import (
    error_structured_output_part,
    update_text_part,
    update_thinking_part,
    update_tool_call_part,
)

STREAM_ENDED = "Stream ended without structured-output.complete"


class StreamState:
    def __init__(self, id_prefix: str = "gen-") -> None:
        self.messages: list[Message] = []
        self._by_id: dict[Any, list[Message]] = {}
        self.id_prefix = id_prefix
        self.position = -1  # index of the chunk being applied
        self._generated = 0  # ids generated for that chunk
        self.now: int | float | None = (
            None  # latest chunk timestamp (ms): createdAt of new messages
        )
        self.reset()

    def reset(self) -> None:
        """``resetStreamState``: everything but the messages."""
        self.drafts: dict[Any, MessageDraft] = {}
        self.active: dict[Any, Any] = {}
        self.tool_index: dict[Any, Any] = {}
        self.pending_rename: Any = None
        self.pending_step: Any = None
        self.structured: dict[Any, Any] = {}
        self.runs: dict[Any, Any] = {}
        self.finish_reason: Any = None
        self.has_error = False
        self.done = False

    # --- ids and times -----------------------------------------------------

    def begin_chunk(self, position: int, timestamp: Any) -> None:
        self.position = position
        self._generated = 0
        if type(timestamp) in (int, float) and abs(timestamp) <= 8.64e15:  # also false for NaN
            self.now = timestamp

    def generate_id(self) -> str:
        """A fresh id, a function of the chunk's position in the log."""
        self._generated += 1
        suffix = f".{self._generated}" if self._generated > 1 else ""
        return f"{self.id_prefix}{self.position}{suffix}"

    # --- the message list --------------------------------------------------

    def message(self, ident: Any) -> Message | None:
        """``messages.find(m => m.id === ident)``."""
        found = self._by_id.get(ident if type(ident) is str else key_of(ident))
        return found[0] if found else None

    def each(self, ident: Any) -> list[Message]:
        """Every message with this id (TanStack's updaters map over all of them)."""
        return self._by_id.get(ident if type(ident) is str else key_of(ident), [])

    def append_message(self, message: Message) -> None:
        self.messages.append(message)
        self._by_id.setdefault(key_of(message.id), []).append(message)

    def set_messages(self, messages: list[Message]) -> None:
        self.messages = messages
        self._reindex()

    def rename_messages(self, old: Any, new: Any) -> None:
        for message in self.each(old):
            message.set_field("id", new)
        self._reindex()

    def remove_messages(self, ident: Any) -> None:
        key = key_of(ident)
        self.messages = [m for m in self.messages if key_of(m.id) != key]
        self._reindex()

    def _reindex(self) -> None:
        self._by_id = {}
        for message in self.messages:
            self._by_id.setdefault(key_of(message.id), []).append(message)

    def new_message(self, ident: Any, role: str) -> Message:
        fields: dict[str, Any] = {"id": ident, "role": role}
        if self.now is not None:
            fields["createdAt"] = iso_from_ms(self.now)
        message = Message(fields, [])
        self.append_message(message)
        return message

    # --- drafts and routing (§4) -------------------------------------------

    def create_draft(self, ident: Any, role: Any, seed: str = "") -> MessageDraft:
        draft = MessageDraft(ident, role, seed)
        self.drafts[key_of(ident)] = draft
        return draft

    def draft(self, ident: Any) -> MessageDraft | None:
        return self.drafts.get(ident if type(ident) is str else key_of(ident))

    def activate(self, ident: Any) -> None:
        self.active.setdefault(key_of(ident), ident)

    def recent(self) -> Any:
        """``getActiveAssistantMessageId``: newest active assistant, else newest
        assistant draft; None when there is none."""
        drafts = self.drafts
        for key in reversed(self.active):
            draft = drafts.get(key)
            if draft is not None and draft.role == "assistant":
                return self.active[key]
        for draft in reversed(drafts.values()):
            if draft.role == "assistant":
                return draft.id
        return None

    def resume(self, ident: Any, draft: MessageDraft) -> None:
        self.activate(ident)
        if draft.complete or self.done:
            draft.complete = False
            self.done = False

    def resolve(self, wanted: Any = UNDEF) -> tuple[Any, MessageDraft]:
        """``ensureAssistantMessage``: the message an event lands on (spec §4)."""
        if truthy(wanted):
            draft = self.draft(wanted)
            if draft is not None:
                self.resume(wanted, draft)
                return wanted, draft
        active = self.recent()
        if truthy(active):
            draft = self.draft(active)
            if draft is not None:
                self.resume(active, draft)
                return active, draft
        if truthy(wanted):
            existing = self.message(wanted)
            if existing is not None:
                last = existing.last_part()
                seed = ""
                if isinstance(last, dict) and last.get("type") == "text":
                    content = last.get("content", UNDEF)
                    seed = content.render() if isinstance(content, StrRef) else to_string(content)
                draft = self.create_draft(wanted, existing.role, seed)
                self.activate(wanted)
                return wanted, draft
        ident = wanted if truthy(wanted) else self.generate_id()
        self.new_message(ident, "assistant")
        draft = self.create_draft(ident, "assistant")
        self.activate(ident)
        self.pending_rename = ident
        return ident, draft

    # --- shared part moves -------------------------------------------------

    def flush_text(self, ident: Any, draft: MessageDraft) -> None:
        """``emitTextUpdateForMessage``: write the whole segment."""
        draft.emitted = draft.segment.size
        part = update_text_part(draft.segment.ref())
        for message in self.each(ident):
            last = message.last_part()
            text_last = isinstance(last, dict) and last.get("type") == "text"
            message.put(len(message.parts) - 1 if text_last else -1, part)

    def put_call(self, ident: Any, fields: dict[str, Any]) -> None:
        for message in self.each(ident):
            position = message.find("tool-call", fields["id"])
            message.put(position, update_tool_call_part(message.part_at(position), fields))

    def call_part_blocked(self, call_id: Any) -> bool:
        """A tool-call part with this id errored or waits for approval anywhere."""
        key = key_of(call_id)
        for message in self.messages:
            for part in message.parts:
                if (
                    isinstance(part, dict)
                    and part.get("type") == "tool-call"
                    and part.get("state") in ("error", "approval-requested", "approval-responded")
                    and key_of(part.get("id", UNDEF)) == key
                ):
                    return True
        return False

    def complete_call(self, ident: Any, call: ToolCallDraft) -> None:
        """``completeToolCall``: input-complete, with the strict parse as input."""
        call.state = "input-complete"
        arguments = call.args.ref()
        try:
            parsed: Any = parse_json(arguments.render())
        except JSONParseError:
            parsed = UNDEF
        if self.call_part_blocked(call.id):
            return
        fields = {
            "id": call.id,
            "name": call.name,
            "arguments": arguments,
            "state": "input-complete",
            "input": parsed,
            "metadata": call.metadata,
        }
        self.put_call(ident, fields)

    def complete_calls(self, ident: Any) -> None:
        draft = self.draft(ident)
        if draft is None:
            return
        for call in list(draft.calls.values()):
            if call.state != "input-complete":
                self.complete_call(ident, call)

    def put_thinking(self, ident: Any, step: StepDraft, signature: Any) -> None:
        part = update_thinking_part(step.key, step.text.ref(), signature)
        for message in self.each(ident):
            message.put(message.find("thinking", step.key), part)

    def error_structured(self, ident: Any, error_message: Any) -> None:
        for message in self.each(ident):
            position = message.find("structured-output")
            part = error_structured_output_part(message.part_at(position), error_message)
            if part is not None:
                message.put(position, part)

    # --- finalization (§10) ------------------------------------------------

    def finalize(self) -> None:
        """``finalizeStream``."""
        self.done = True
        last: Message | None = None
        # The reference judges "whitespace only" on the message object it
        # captured here, before structured outputs are errored below.
        last_parts: list[Any] = []
        for key, ident in list(self.active.items()):
            draft = self.drafts.get(key)
            if draft is None:
                continue
            self.complete_calls(ident)
            if draft.text_pending():
                self.flush_text(ident, draft)
            draft.complete = True
            message = self.message(ident)
            if message is not None and message.role == "assistant":
                last = message
                last_parts = message.plain_parts()
        for ident in list(self.structured.values()):
            self.error_structured(ident, STREAM_ENDED)
        self.structured.clear()
        self.active.clear()
        if last is not None and not self.has_error and _whitespace_only(last_parts):
            self.remove_messages(last.id)


def _whitespace_only(parts: list[Any]) -> bool:
    return bool(parts) and all(
        isinstance(p, dict)
        and p.get("type") == "text"
        and isinstance(p.get("content"), str)
        and trim(p["content"]) == ""
        for p in parts
    )
