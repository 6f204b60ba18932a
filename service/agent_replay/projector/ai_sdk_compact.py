"""A UI message stream so far, compacted: the prefix a resuming AI SDK client is sent.

`useChat({ resume: true })` reconnects with no cursor, so the client must be
sent the whole message again before the live chunks. Fed the chunks
`UIMessageStreamEncoder` made of the log up to a seq, `prefix()` answers a
stream the client folds into the same message, in bytes that grow with the
content instead of with the number of deltas:

    text-delta, reasoning-delta   a part's deltas joined into one, at its first delta's place
    tool-input-delta              the same; none once the input is complete
                                  (tool-input-available / -error carries it whole)
    data-* with an id             one chunk, at its first place, with the last value
                                  (the client updates such a part in place)
    everything else               kept, in order: starts, ends, steps, tool outputs, ...

A part still open stays open (its start and its content so far, no end), so
the live chunks that follow continue it; every part the prefix holds begins
with its own start: a client never receives content for a part it has not
seen start. Pure: only the encoder's chunks are read, never a clock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Chunk = dict[str, Any]

# A delta chunk's type: the field naming its part, the field holding its text.
DELTAS = {
    "text-delta": ("id", "delta"),
    "reasoning-delta": ("id", "delta"),
    "tool-input-delta": ("toolCallId", "inputTextDelta"),
}
# The chunks after which a part takes no more deltas under its id.
ENDS = {
    "text-end": ("text-delta", "id"),
    "reasoning-end": ("reasoning-delta", "id"),
    "tool-input-available": ("tool-input-delta", "toolCallId"),
    "tool-input-error": ("tool-input-delta", "toolCallId"),
}
# Ends that carry the whole input: the streamed pieces before them add nothing.
WHOLE = frozenset({"tool-input-available", "tool-input-error"})


@dataclass
class _Joined:
    """One part's deltas, sent as one chunk at the first one's place."""

    first: Chunk
    text_field: str
    pieces: list[str]
    dropped: bool = False

    def chunk(self) -> Chunk:
        return {**self.first, self.text_field: "".join(self.pieces)}


@dataclass
class UIMessageStreamCompactor:
    """Chunks in, in stream order; `prefix()` the same message in as few chunks as it takes."""

    _items: list[Chunk | _Joined] = field(default_factory=list)
    _open: dict[tuple[str, str], _Joined] = field(default_factory=dict)
    _data: dict[tuple[str, str], Chunk] = field(default_factory=dict)

    def add(self, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            self._add(chunk)

    def _add(self, chunk: Chunk) -> None:
        kind = chunk.get("type")
        if not isinstance(kind, str):
            self._items.append(chunk)
            return
        delta = DELTAS.get(kind)
        if delta is not None:
            key = (kind, str(chunk.get(delta[0])))
            text = chunk.get(delta[1])
            joined = self._open.get(key)
            if joined is not None and isinstance(text, str):
                joined.pieces.append(text)
            elif isinstance(text, str):
                joined = _Joined(chunk, delta[1], [text])
                self._open[key] = joined
                self._items.append(joined)
            else:  # not ours to reshape: kept as it came
                self._items.append(chunk)
            return
        end = ENDS.get(kind)
        if end is not None:
            ended = self._open.pop((end[0], str(chunk.get(end[1]))), None)
            if ended is not None and kind in WHOLE:
                ended.dropped = True
        elif kind.startswith("data-") and "id" in chunk and not chunk.get("transient"):
            key = (kind, str(chunk["id"]))
            earlier = self._data.get(key)
            if earlier is not None:
                earlier["data"] = chunk.get("data")
                return
            chunk = self._data[key] = dict(chunk)  # ours: its value changes as more come
        self._items.append(chunk)

    def prefix(self) -> list[Chunk]:
        """The stream so far, compacted (the compactor can take more chunks after)."""
        out: list[Chunk] = []
        for item in self._items:
            if isinstance(item, _Joined):
                if not item.dropped:
                    out.append(item.chunk())
            else:
                out.append(item)
        return out
