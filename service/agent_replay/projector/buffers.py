"""Append-only text buffers and the lazy part values that point into them.

Streamed strings (a text segment, tool arguments, thinking text, structured
output ``raw``) grow by a delta per chunk, and the reference writes the whole
string into a part after every delta. Copying the string each time makes a
50 KB argument streamed 20 characters at a time cost ~60 MB of copying. Here
a part holds a ``StrRef`` (buffer, length) instead: O(1) per delta, and the
string is built only when the part is rendered (once in batch, once per read
when tailing). A ``StrRef`` is immutable: the buffer only grows past it.

``LazyPartial`` does the same for the structured-output ``partial``: the
reference partial-parses ``raw`` after every delta and keeps the previous
value when a parse gives nothing, so the value at delta *k* is the parse of
the latest prefix (at a delta boundary) that parses. It is computed on
demand, walking back over the boundaries, with a memo per boundary.
"""

from __future__ import annotations

from typing import Any

from agent_replay.projector.jsvalues import (
    UNDEF,
    ends_high_surrogate,
    join_surrogates,
    starts_low_surrogate,
)
from agent_replay.projector.partial_json import NO_VALUE, parse_partial


class StrBuf:
    """An append-only string, joined lazily."""

    __slots__ = ("_pieces", "size", "split_pair")

    def __init__(self, initial: str = "") -> None:
        self._pieces: list[str] = [initial] if initial else []
        self.size = len(initial)
        # Set once a delta starts with the low half of a surrogate pair whose
        # high half ended the previous delta: rendering must then rejoin.
        self.split_pair = False

    def append(self, piece: str) -> None:
        if not piece:
            return
        pieces = self._pieces
        if pieces and starts_low_surrogate(piece) and ends_high_surrogate(pieces[-1]):
            self.split_pair = True
        pieces.append(piece)
        self.size += len(piece)

    def text(self, end: int) -> str:
        pieces = self._pieces
        if len(pieces) > 1:
            pieces[:] = ["".join(pieces)]
        whole = pieces[0] if pieces else ""
        value = whole if end == self.size else whole[:end]
        return join_surrogates(value) if self.split_pair else value

    def ref(self) -> StrRef:
        return StrRef(self, self.size)


class StrRef:
    """The first ``end`` characters of a buffer, as they were when taken."""

    __slots__ = ("buf", "end")

    def __init__(self, buf: StrBuf, end: int) -> None:
        self.buf = buf
        self.end = end

    def render(self) -> str:
        return self.buf.text(self.end)


class PartialTracker:
    """Delta boundaries of a structured-output ``raw`` and their parses."""

    __slots__ = ("buf", "ends", "fallback", "memo")

    def __init__(self, buf: StrBuf, fallback: Any) -> None:
        self.buf = buf
        self.ends: list[int] = []
        self.fallback = fallback  # the partial before the first boundary, or UNDEF
        self.memo: dict[int, Any] = {}

    def mark(self) -> LazyPartial:
        self.ends.append(self.buf.size)
        return LazyPartial(self, len(self.ends) - 1)

    def value_at(self, index: int) -> Any:
        memo = self.memo
        probe = index
        value: Any = UNDEF
        while probe >= 0:
            if probe in memo:
                value = memo[probe]
                break
            parsed = parse_partial(self.buf.text(self.ends[probe]))
            if parsed is not NO_VALUE and parsed is not None:
                value = parsed
                break
            probe -= 1
        else:
            value = self.fallback
        memo[index] = value
        return value


class LazyPartial:
    """The ``partial`` of the structured-output part written at boundary ``index``."""

    __slots__ = ("index", "tracker")

    def __init__(self, tracker: PartialTracker, index: int) -> None:
        self.tracker = tracker
        self.index = index

    def render(self) -> Any:
        return self.tracker.value_at(self.index)
