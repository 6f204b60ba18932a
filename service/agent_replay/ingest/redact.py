"""Redaction at write time: chunks in, the chunks the log may store out.

A `Redactor` is fed a run's chunks in order (one append's, or a hosted run's reads) and
answers the chunks to store. Every text-bearing field is matched against the rules:

- streamed deltas (text, reasoning and thinking content, tool-call arguments) as one text
  per open message or tool call, so a secret split over any number of deltas is found;
  what could still be the start of a match is held back (never more than the rules'
  longest window) and released with the next delta of the same stream, before its END,
  before the run's terminal event, or by `finish()`;
- tool-call arguments as JSON text: the lexer below decodes each string value as it
  streams (escapes included) and keeps the producer's raw text for what is not redacted,
  so the stored arguments are valid JSON whose decoded values carry the marker;
- every string of any other event (tool results, state, custom values, snapshots, the
  run's input and errors), whole.

A delta held entirely is not stored (AG-UI forbids an empty delta); its text goes out with
a later event of the same stream. A chunk nothing changed is passed on as it came, so text
without secrets is stored byte for byte.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

from agent_replay.event_types import TERMINAL
from agent_replay.ingest.rules import Rule, RuleSet
from agent_replay.log.chunks import loads, stored
from agent_replay.log.values import StoredChunk
from agent_replay.metrics import REDACTIONS

Span = tuple[int, int, Rule]

# A streamed type -> (the key its stream is known by, whether its delta is JSON text).
_TEXT_STREAMS = {
    "TEXT_MESSAGE_CONTENT": ("text", "messageId"),
    "TEXT_MESSAGE_CHUNK": ("text", "messageId"),
    "REASONING_MESSAGE_CONTENT": ("reasoning", "messageId"),
    "REASONING_MESSAGE_CHUNK": ("reasoning", "messageId"),
    "THINKING_TEXT_MESSAGE_CONTENT": ("thinking", ""),
    "TOOL_CALL_ARGS": ("args", "toolCallId"),
    "TOOL_CALL_CHUNK": ("args", "toolCallId"),
}
_ENDS = {
    "TEXT_MESSAGE_END": ("text", "messageId"),
    "REASONING_MESSAGE_END": ("reasoning", "messageId"),
    "THINKING_TEXT_MESSAGE_END": ("thinking", ""),
    "TOOL_CALL_END": ("args", "toolCallId"),
}
# Fields of a streamed event that are structure, not content. Anything else in it is
# redacted whole, but `rawEvent`: an upstream's own copy of the delta cannot be matched
# across deltas, so it is not stored.
_STREAM_FIELDS = {"type", "messageId", "toolCallId", "delta", "timestamp", "role", "name",
                  "toolCallName", "parentMessageId"}  # fmt: skip


class Rules:
    """A `RuleSet` compiled for matching."""

    __slots__ = ("rules", "window")

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules.rules
        self.window = rules.window

    def clean(self, text: str) -> bool:
        """Whether `text` holds no match of any rule, whole (a cheap first look)."""
        # One search per rule: an alternation of all of them would cost more, as neither
        # engine can then skip ahead to a rule's literal prefix.
        return not any(rule.pattern.search(text) for rule in self.rules)

    def cut(self, text: str, final: bool) -> tuple[int, list[Span]]:
        """How much of `text` can go out now, and the matches in that part.

        Not final: a match that more text could still change, or a partial one (text that
        more text could turn into a match), holds back from its start.
        """
        release = len(text)
        spans: list[Span] = []
        for rule in self.rules:
            pattern, pos = rule.pattern, 0
            # A rule matches at most `window` characters, so only a match starting in the
            # last `window` could still grow or be cut short by the text's end: partial
            # matching (costly) looks there only.
            tail = max(0, len(text) - rule.window)
            while pos <= len(text):
                m = pattern.search(text, pos)
                if not final:
                    p = pattern.search(text, max(pos, tail), partial=True)
                    if p is not None and (m is None or p.start() < m.start()):
                        m = p
                if m is None:
                    break
                start, end = m.span()
                # Text that more text could still make (or make longer) a match: held. A
                # match that ends early may grow too (`a@b.co` then `.uk`): it waits while
                # all that follows it could still be part of it.
                if not final and (
                    m.partial
                    or (start >= tail and pattern.fullmatch(text, start, partial=True) is not None)
                ):
                    release = min(release, start)
                    break
                if end > start and (rule.check is None or rule.check(m.group())):
                    spans.append((start, end, rule))
                pos = end if end > start else start + 1
        if not spans:
            return release, spans
        spans.sort(key=lambda s: (s[0], -s[1]))
        merged: list[Span] = []
        for span in spans:
            if merged and span[0] < merged[-1][1]:
                last = merged[-1]
                merged[-1] = (last[0], max(last[1], span[1]), last[2])
            else:
                merged.append(span)
        # A match across the release point waits whole.
        kept = []
        for span in merged:
            if span[1] > release:
                release = min(release, span[0])
                break
            kept.append(span)
        return release, [s for s in kept if s[1] <= release]


class _Text:
    """One open stream of plain text: what is held back."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = ""

    def feed(self, rules: Rules, delta: str, counts: Counter[str], final: bool = False) -> str:
        text = self.held + delta
        release, spans = rules.cut(text, final)
        self.held = text[release:]
        return _render(text, release, spans, None, counts)


def _render(
    text: str,
    upto: int,
    spans: list[Span],
    raw: list[str] | None,
    counts: Counter[str],
    start: int = 0,
) -> str:
    """`text[start:upto]` with each span replaced by its rule's marker; characters kept are
    written as the producer wrote them (`raw`, where it differs from the decoded text)."""
    out: list[str] = []
    at = start
    for begin, end, rule in spans:
        out.append(text[at:begin] if raw is None else "".join(raw[at:begin]))
        out.append(rule.marker)
        counts[rule.name] += 1
        at = end
    out.append(text[at:upto] if raw is None else "".join(raw[at:upto]))
    return "".join(out)


_STRING_SPECIAL = re.compile(r'["\\]')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _Json:
    """One tool call's arguments: JSON text, its string values decoded as they stream.

    Outside strings the text passes at once. Inside one, the decoded characters are
    matched as a `_Text` is, each kept with the raw text it came as (an escape is one
    character); a string's end releases all of it.
    """

    __slots__ = ("escape", "in_string", "raw", "text")

    def __init__(self) -> None:
        self.in_string = False
        self.escape = ""  # an escape begun but not complete
        self.text = ""  # the open string's decoded characters not yet released
        self.raw: list[str] | None = None  # their raw text, once one differs

    def _add(self, decoded: str, raw: str) -> None:
        if self.raw is None:
            if decoded == raw:
                self.text += decoded
                return
            self.raw = list(self.text)
        self.text += decoded
        if len(decoded) == len(raw):
            self.raw.extend(raw)
        else:
            self.raw.append(raw)

    def _release(self, rules: Rules, counts: Counter[str], final: bool) -> str:
        text, raw = self.text, self.raw
        release, spans = rules.cut(text, final)
        out = _render(text, release, spans, raw, counts)
        self.text = text[release:]
        self.raw = None if raw is None else raw[release:]
        if self.raw is not None and "".join(self.raw) == self.text:
            self.raw = None
        return out

    def feed(self, rules: Rules, delta: str, counts: Counter[str], final: bool = False) -> str:
        out: list[str] = []
        i, n = 0, len(delta)
        while i < n:
            if not self.in_string:
                j = delta.find('"', i)
                if j < 0:
                    out.append(delta[i:])
                    break
                out.append(delta[i : j + 1])
                self.in_string, i = True, j + 1
                continue
            if self.escape:
                need = (
                    6
                    if self.escape[1:2] == "u" or (len(self.escape) == 1 and delta[i] == "u")
                    else 2
                )
                take = delta[i : i + need - len(self.escape)]
                self.escape += take
                i += len(take)
                if len(self.escape) < need:
                    break
                esc, self.escape = self.escape, ""
                if esc[1] == "u":
                    try:
                        self._add(chr(int(esc[2:], 16)), esc)
                    except ValueError:  # not JSON: kept as it came
                        self._add(esc, esc)
                else:
                    self._add(_ESCAPES.get(esc[1], esc), esc)
                continue
            m = _STRING_SPECIAL.search(delta, i)
            stop = n if m is None else m.start()
            if stop > i:
                self._add(delta[i:stop], delta[i:stop])
            if m is None:
                break
            if delta[stop] == "\\":
                self.escape, i = "\\", stop + 1
                continue
            out.append(self._release(rules, counts, True))
            out.append('"')
            self.in_string, i = False, stop + 1
        if self.in_string:
            out.append(self._release(rules, counts, final))
            if final and self.escape:  # an escape cut short at the end: kept as it came
                out.append(self.escape)
                self.escape = ""
        return "".join(out)


_Stream = _Text | _Json


def _held_size(stream: _Stream) -> int:
    if isinstance(stream, _Text):
        return len(stream.held)
    return len(stream.text) + len(stream.escape) + (0 if stream.raw is None else len(stream.raw))


class Redactor:
    """Redacts one run's chunks, fed in order; `counts` says how many matches per rule."""

    __slots__ = ("_final", "_last", "_rules", "_streams", "counts")

    def __init__(self, rules: RuleSet | Rules) -> None:
        self._rules = rules if isinstance(rules, Rules) else Rules(rules)
        # (kind, id) -> its stream and the type and id field of the events it came in.
        self._streams: dict[tuple[str, str | None], tuple[_Stream, str, str]] = {}
        self._last: dict[str, str | None] = {}  # kind -> the id of its last CHUNK event
        # Indexes of the chunks being fed whose stream releases everything it holds.
        self._final: set[int] = set()
        self.counts: Counter[str] = Counter()

    def take_counts(self) -> Counter[str]:
        """The matches counted since the last call."""
        counts, self.counts = self.counts, Counter()
        return counts

    def value(self, value: Any) -> Any:
        """A JSON value with every string redacted whole (a run's stored input)."""
        return self._value(value)[0]

    @property
    def holding(self) -> bool:
        return any(s.held if isinstance(s, _Text) else s.text or s.escape
                   for s, _, _ in self._streams.values())  # fmt: skip

    def request(self, chunks: Sequence[StoredChunk]) -> Sequence[StoredChunk]:
        """One request's chunks, all of it released by its end: each stream's last delta
        in it takes what the stream still holds (so a request of one delta is kept as
        sent unless that delta holds a match, and no event is made up)."""
        last: dict[tuple[str, str | None], int] = {}
        ids: dict[str, str | None] = {}
        for index, chunk in enumerate(chunks):
            streamed = _TEXT_STREAMS.get(chunk.type)
            if streamed is None:
                continue
            name, field = streamed
            ident = None
            if field:
                ident = chunk.message_id if field == "messageId" else chunk.tool_call_id
                if chunk.type.endswith("_CHUNK"):
                    ident = ids[name] = ident if ident is not None else ids.get(name)
            last[(name, ident)] = index
        self._final = set(last.values())
        try:
            out = self.chunks(chunks)
        finally:
            self._final = set()
        tail = self.finish()
        return [*out, *tail] if tail else out

    def append(self, chunks: Sequence[StoredChunk], close: bool) -> Sequence[StoredChunk]:
        """One pushed append's chunks, what they settle of the run's held text with them;
        what is still held stays (`state`), but for a closing append, which releases all
        of it before the close."""
        out = self.chunks(chunks)
        if not close:
            return out
        tail = self.finish()
        return [*out, *tail] if tail else out

    def state(self) -> dict[str, Any] | None:
        """What the redactor holds for the run's open streams, as JSON (None: nothing,
        so a fresh redactor carries on exactly as this one would): each stream's held
        text (a tool call's also its lexer's place and the raw text kept), and the last
        CHUNK ids. `Redactor.restore` reads it back."""
        streams: list[list[Any]] = []
        for (name, ident), (stream, kind, field) in self._streams.items():
            if isinstance(stream, _Text):
                if stream.held:
                    streams.append([name, ident, kind, field, stream.held])
            elif stream.in_string or stream.escape or stream.text:
                streams.append(
                    [name, ident, kind, field, stream.text, stream.raw, stream.in_string,
                     stream.escape]
                )  # fmt: skip
        if not streams and not self._last:
            return None
        return {"streams": streams, "last": dict(self._last)}

    def shed(self, most: int) -> list[StoredChunk]:
        """Release whole streams, the longest-open first, until at most `most` characters
        are held: what an append keeps with its run is bounded whatever the producer opens
        (each stream released is matched as complete text, as at its END)."""
        out: list[StoredChunk] = []
        held = {key: _held_size(entry[0]) for key, entry in self._streams.items()}
        total = sum(held.values())
        for key, size in held.items():
            if total <= most:
                break
            if size:
                out.extend(self._close(key))
                total -= size
        return out

    @classmethod
    def restore(cls, rules: Rules, state: dict[str, Any] | None) -> Redactor:
        """A redactor holding what `state` (from `Redactor.state`) says."""
        redactor = cls(rules)
        if state is None:
            return redactor
        for entry in state["streams"]:
            name, ident, kind, field = entry[:4]
            stream: _Stream
            if len(entry) == 5:
                stream = _Text()
                stream.held = entry[4]
            else:
                stream = _Json()
                stream.text, stream.raw, stream.in_string, stream.escape = entry[4:8]
            redactor._streams[(name, ident)] = (stream, kind, field)
        redactor._last = dict(state["last"])
        return redactor

    def chunks(self, chunks: Sequence[StoredChunk]) -> Sequence[StoredChunk]:
        """`chunks` as they may be stored: the same object when nothing changed.

        A text stream's deltas are matched together, once per stretch of them (up to its
        END, the run's terminal event, the stream's last delta of a request, or the end of
        `chunks`), not once per delta: what a stretch holds is known whole, so each delta
        keeps its own text unless a match crosses into it, and matching costs a search of
        the stretch rather than of every delta's held text again.
        """
        results: list[list[StoredChunk] | None] = [None] * len(chunks)
        waiting: dict[tuple[str, str | None], list[_Waiting]] = {}
        for index, chunk in enumerate(chunks):
            kind = chunk.type
            streamed = _TEXT_STREAMS.get(kind)
            if streamed is not None and streamed[0] != "args":
                parsed = self._parse_delta(chunk, *streamed)
                if parsed is None:
                    results[index] = self._whole(chunk, index)
                    continue
                value, delta, key = parsed
                if key not in self._streams:
                    self._streams[key] = (_Text(), kind, streamed[1])
                waiting.setdefault(key, []).append(_Waiting(index, chunk, value, delta))
                if index in self._final:
                    self._flush(key, waiting, results, final=True)
                    del self._streams[key]
                continue
            ending = _ENDS.get(kind)
            if ending is not None and ending[0] != "args":
                name, field = ending
                ident = chunk.message_id if field == "messageId" else chunk.tool_call_id
                self._flush((name, ident if field else None), waiting, results, final=True)
            elif kind in TERMINAL:
                for key in list(waiting):
                    self._flush(key, waiting, results, final=True)
            results[index] = self._one(chunk, index)
        for key in list(waiting):
            self._flush(key, waiting, results, final=False)
        out: list[StoredChunk] | None = None
        for index, chunk in enumerate(chunks):
            result = results[index]
            assert result is not None  # every index was given its result above
            if out is None:
                if len(result) == 1 and result[0] is chunk:
                    continue
                out = list(chunks[:index])
            out.extend(result)
        return chunks if out is None else out

    def _flush(
        self,
        key: tuple[str, str | None],
        waiting: dict[tuple[str, str | None], list[_Waiting]],
        results: list[list[StoredChunk] | None],
        final: bool,
    ) -> None:
        """A text stream's waiting deltas matched as one text (after what it held): each
        delta's result, and what the stream holds after them."""
        entries = waiting.pop(key, None)
        if not entries:
            return
        entry = self._streams[key]
        stream, field = entry[0], entry[2]
        assert isinstance(stream, _Text)  # only text streams wait
        bound = len(stream.held)  # each delta's end in the text
        text = stream.held + "".join(e.delta for e in entries)
        release, spans = self._rules.cut(text, final)
        stream.held = text[release:]
        # Each delta's part of the text (the first's starts with what was held), cut back to
        # the start of a match that crosses its end: a match goes out whole, with the delta
        # it ends in.
        lo, j = 0, 0
        for e in entries:
            bound += len(e.delta)
            hi = min(bound, release)
            k = j
            while k < len(spans) and spans[k][1] <= hi:
                k += 1
            if k < len(spans) and spans[k][0] < hi:
                hi = spans[k][0]
            out = _render(text, hi, spans[j:k], None, self.counts, lo)
            results[e.at] = self._emit(e.chunk, e.at, e.value, e.delta, out, field)
            lo, j = hi, k

    def finish(self) -> list[StoredChunk]:
        """Every stream's held text, released (at the end of what the redactor is fed, or
        of the run): every stream ends, CHUNK events' last ids included."""
        out: list[StoredChunk] = []
        for key in list(self._streams):
            out.extend(self._close(key))
        self._last.clear()
        return out

    def _close(self, key: tuple[str, str | None]) -> list[StoredChunk]:
        entry = self._streams.pop(key, None)
        if entry is None:
            return []
        stream, kind, field = entry
        text = stream.feed(self._rules, "", self.counts, final=True)
        if not text:
            return []
        value: dict[str, Any] = {"type": kind}
        if field:
            value[field] = key[1]
        value["delta"] = text
        return [stored(value, 0)]

    def _one(self, chunk: StoredChunk, index: int) -> list[StoredChunk]:
        kind = chunk.type
        streamed = _TEXT_STREAMS.get(kind)
        if streamed is not None:
            return self._delta(chunk, index, *streamed)
        ending = _ENDS.get(kind)
        if ending is not None:
            name, field = ending
            ident = chunk.message_id if field == "messageId" else chunk.tool_call_id
            held = self._close((name, ident if field else None))
            if field and self._last.get(name) == ident:
                self._last.pop(name, None)
            return [*held, *self._whole(chunk, index)]
        if kind in TERMINAL:
            return [*self.finish(), *self._whole(chunk, index)]
        return self._whole(chunk, index)

    def _whole(self, chunk: StoredChunk, index: int) -> list[StoredChunk]:
        text = chunk.text
        if "\\" not in text and self._rules.clean(text):
            return [chunk]
        value = loads(text)
        new, changed = self._value(value, True)
        return [stored(new, index)] if changed else [chunk]

    def _value(self, value: Any, top: bool = False) -> tuple[Any, bool]:
        if isinstance(value, str):
            if self._rules.clean(value):
                return value, False
            release, spans = self._rules.cut(value, True)
            if not spans:
                return value, False
            return _render(value, release, spans, None, self.counts), True
        if isinstance(value, list):
            changed = False
            items = []
            for item in value:
                new, did = self._value(item)
                items.append(new)
                changed |= did
            return (items, True) if changed else (value, False)
        if isinstance(value, dict):
            changed = False
            fields = {}
            for k, item in value.items():
                if top and (k == "type" or k.endswith("Id")):
                    fields[k] = item
                    continue
                new, did = self._value(item)
                fields[k] = new
                changed |= did
            return (fields, True) if changed else (value, False)
        return value, False

    def _parse_delta(
        self, chunk: StoredChunk, name: str, field: str
    ) -> tuple[dict[str, Any], str, tuple[str, str | None]] | None:
        """A streamed event's value, delta and stream key; None if its delta is no string."""
        value = loads(chunk.text)
        delta = value.get("delta") if isinstance(value, dict) else None
        if not isinstance(delta, str):
            return None
        ident: str | None = None
        if field:
            ident = value.get(field) if isinstance(value.get(field), str) else None
            if chunk.type.endswith("_CHUNK"):
                # A chunk without an id continues the last chunk's message or call.
                if ident is None:
                    ident = self._last.get(name)
                self._last[name] = ident
        return value, delta, (name, ident)

    def _delta(self, chunk: StoredChunk, index: int, name: str, field: str) -> list[StoredChunk]:
        """A tool call's arguments delta, fed to its stream's JSON lexer."""
        parsed = self._parse_delta(chunk, name, field)
        if parsed is None:
            return self._whole(chunk, index)
        value, delta, key = parsed
        entry = self._streams.get(key)
        if entry is None:
            entry = (_Json() if name == "args" else _Text(), chunk.type, field)
            self._streams[key] = entry
        final = index in self._final
        out = entry[0].feed(self._rules, delta, self.counts, final)
        if final:
            del self._streams[key]
        return self._emit(chunk, index, value, delta, out, field)

    def _emit(
        self,
        chunk: StoredChunk,
        index: int,
        value: dict[str, Any],
        delta: str,
        out: str,
        field: str,
    ) -> list[StoredChunk]:
        """The event to store for a streamed event whose delta became `out`."""
        extra = {k: v for k, v in value.items() if k not in _STREAM_FIELDS}
        if out == delta and not extra:
            return [chunk]
        rest, _ = self._value(extra) if extra else ({}, False)
        value = {k: v for k, v in value.items() if k in _STREAM_FIELDS}
        value.update({k: v for k, v in rest.items() if k != "rawEvent"})
        if not out and not chunk.type.endswith("_CHUNK"):
            return []  # held whole: stored with a later event of its stream
        if not out:
            # A chunk event may open its message (role, name): it is kept, without a delta.
            value.pop("delta", None)
            if set(value) <= {"type", "timestamp", field}:
                return []
        else:
            value["delta"] = out
        return [stored(value, index)]


class _Waiting(NamedTuple):
    """A text delta waiting for its stretch's match (`Redactor.chunks`)."""

    at: int  # its index in what is being fed
    chunk: StoredChunk
    value: dict[str, Any]
    delta: str


def redact_request(
    rules: Rules | None, chunks: Sequence[StoredChunk]
) -> tuple[Sequence[StoredChunk], Counter[str]]:
    """One append's chunks redacted as a whole: what it holds back of a message still open
    at its end is released at its end (a request keeps nothing in memory after it)."""
    if rules is None:
        return chunks, Counter()
    redactor = Redactor(rules)
    return redactor.request(chunks), redactor.counts


def record(counts: Counter[str]) -> None:
    """Count matches stored (`replay_redactions_total{rule}`), once their append committed."""
    for rule, n in counts.items():
        REDACTIONS.labels(rule).inc(n)
