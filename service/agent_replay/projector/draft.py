"""Per-message stream drafts (TanStack's ``MessageStreamState``).

A draft is the private, mutable side of a message being streamed: the text
segment and what was last written of it, thinking steps, and tool calls with
their accumulated arguments. Handlers change drafts, then project the change
into parts through the updaters. Drafts never leave the projector.
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.buffers import StrBuf


class ToolCallDraft:
    """``InternalToolCallState``: one streamed tool call."""

    __slots__ = ("args", "id", "metadata", "name", "state")

    def __init__(self, ident: Any, name: Any, metadata: Any) -> None:
        self.id = ident
        self.name = name
        self.args = StrBuf()
        self.state = "awaiting-input"
        self.metadata = metadata  # UNDEF when the start chunk had none


class StepDraft:
    """A thinking step: its key as given (a string, null or absent) and text."""

    __slots__ = ("key", "text")

    def __init__(self, key: Any, text: StrBuf) -> None:
        self.key = key
        self.text = text


class MessageDraft:
    """``MessageStreamState`` for one message id."""

    __slots__ = (
        "calls",
        "complete",
        "current_step",
        "emitted",
        "id",
        "role",
        "segment",
        "signatures",
        "steps",
        "tool_since_text",
    )

    def __init__(self, ident: Any, role: Any, seed: str = "") -> None:
        self.id = ident
        self.role = role
        # The segment only grows until it is reset, and every write puts the
        # whole segment into a part, so "what was last written" is a length.
        self.segment = StrBuf(seed)
        self.emitted = self.segment.size
        self.steps: dict[Any, StepDraft] = {}  # key_of(step) -> step, in order
        self.signatures: dict[Any, Any] = {}
        self.current_step: Any = None  # JS null: no current step
        self.calls: dict[Any, ToolCallDraft] = {}  # key_of(id) -> call, in start order
        self.tool_since_text = False
        self.complete = False

    def text_pending(self) -> bool:
        """``currentSegmentText !== lastEmittedText``."""
        return self.emitted != self.segment.size

    def reset_segment(self) -> None:
        self.segment = StrBuf()
        self.emitted = 0

    def step(self, key: Any, step_key: Any) -> StepDraft:
        """The step for ``step_key`` (keyed ``key``), added empty if new."""
        found = self.steps.get(key)
        if found is None:
            found = self.steps[key] = StepDraft(step_key, StrBuf())
        return found
