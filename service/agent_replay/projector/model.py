"""The projected messages: one ``Message`` per UIMessage, with a render cache.

TanStack rebuilds the whole ``messages`` array on every update. Here a
message is updated in place: its parts are replaced by index or appended
(the only two moves the reference makes outside snapshots), an index finds a
part by kind and id without scanning, and ``render()`` returns a fresh plain
dict only for messages that changed since the last read. Rendered dicts are
never mutated afterwards, so a caller may keep them as snapshots.
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.buffers import LazyPartial, StrRef
from agent_replay.projector.jsvalues import UNDEF, key_of
from agent_replay.projector.updaters import Part

_DIRTY: Any = object()  # a part not rendered since it last changed


def render_value(value: Any) -> Any:
    kind = type(value)
    if kind is StrRef or kind is LazyPartial:
        return value.render()
    return value


def render_part(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    out = {}
    for key, value in part.items():
        kind = type(value)
        if kind is StrRef or kind is LazyPartial:
            value = value.render()
        if value is not UNDEF:
            out[key] = value
    return out


class Message:
    """A UIMessage under construction. ``fields`` holds every key but ``parts``."""

    __slots__ = ("_index", "_rendered", "_view", "fields", "parts")

    def __init__(self, fields: dict[str, Any], parts: list[Any]) -> None:
        self.fields = fields
        self.parts = parts
        self._rendered: list[Any] = [_DIRTY] * len(parts)
        self._view: dict[str, Any] | None = None
        self._index: dict[tuple[str, Any], int] | None = None

    @property
    def id(self) -> Any:
        return self.fields.get("id", UNDEF)

    @property
    def role(self) -> Any:
        return self.fields.get("role", UNDEF)

    def set_field(self, key: str, value: Any) -> None:
        self.fields[key] = value
        self._view = None

    # --- parts -------------------------------------------------------------

    def _lookup(self) -> dict[tuple[str, Any], int]:
        if self._index is None:
            self._index = {}
            for position, part in enumerate(self.parts):
                self._note(position, part)
        return self._index

    def _note(self, position: int, part: Any) -> None:
        assert self._index is not None
        if not isinstance(part, dict):
            return
        kind = part.get("type")
        if kind == "tool-call":
            slot = ("tool-call", key_of(part.get("id", UNDEF)))
        elif kind == "tool-result":
            slot = ("tool-result", key_of(part.get("toolCallId", UNDEF)))
        elif kind == "thinking":
            slot = ("thinking", key_of(part.get("stepId", UNDEF)))
        elif kind == "structured-output":
            slot = ("structured-output", None)
        else:
            return
        self._index.setdefault(slot, position)

    def find(self, kind: str, ident: Any = None) -> int:
        """Position of the first part of this kind with this id, or -1."""
        key = ident if type(ident) is str else key_of(ident)
        return self._lookup().get((kind, key), -1)

    def part_at(self, position: int) -> Part | None:
        return self.parts[position] if position >= 0 else None

    def put(self, position: int, part: Part) -> None:
        """Replace the part at ``position``, or append when it is -1."""
        if position >= 0:
            self.parts[position] = part
            self._rendered[position] = _DIRTY
        else:
            self.parts.append(part)
            self._rendered.append(_DIRTY)
            if self._index is not None:
                self._note(len(self.parts) - 1, part)
        self._view = None

    def last_part(self) -> Any:
        return self.parts[-1] if self.parts else None

    # --- reading -------------------------------------------------------------

    def render(self) -> dict[str, Any]:
        view = self._view
        if view is None:
            rendered = self._rendered
            for position, cached in enumerate(rendered):
                if cached is _DIRTY:
                    rendered[position] = render_part(self.parts[position])
            view = {k: render_value(v) for k, v in self.fields.items() if v is not UNDEF}
            view["parts"] = list(rendered)
            self._view = view
        return view

    def plain_parts(self) -> list[Any]:
        """The parts with lazy values resolved (input to snapshot reconciliation)."""
        return list(self.render()["parts"])
