"""The typewriter decoder: streamed JSON in, newly decoded values per JSON path out.

A tool call's arguments arrive as `TOOL_CALL_ARGS` deltas cut anywhere (inside
a key, an escape, a surrogate pair). Re-parsing the accumulated text after
every delta and printing the new suffix (the usual method, and TanStack's
partial parse) costs the whole text per delta: quadratic in the argument's
length. This decoder keeps its place instead and looks at each character once:

    decoder = Decoder()
    for delta in deltas:
        for piece in decoder.feed(delta):
            ...   # Piece("/content", text="import React"), Piece("/n", value=3)
    decoder.finish()

Per path (a JSON Pointer, RFC 6901; "" is the root) it emits the newly
decoded characters of a string (escapes resolved, surrogate pairs joined even
across deltas), marked `done` when the string closes, and each scalar
(number, true, false, null) once it is complete. Concatenating a path's texts
gives the decoded string; nothing emitted is ever taken back. Containers are
not emitted: their members are.

Input that is not JSON stops the decoder (`failed` says where); what it
emitted before stays valid.

Memory and time stay linear in the input whatever its shape. Each value's
path is a new string as long as its parent's plus its key, so a document
nested very deep (or under very long keys) would cost the square of its size
in paths. The decoder gives up decoding, and emits everything from there on
as `raw` text at the root path (the rest of the arguments as they were
sent), when an array or object would open past `MAX_DEPTH`, or when the
paths it built would outgrow `_PATH_CHARS_PER_CHAR` characters per input
character (after `_PATH_CHARS_FREE`): no real tool call comes near either.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

from agent_replay.projector.jsvalues import MAX_DEPTH

__all__ = ["Decoder", "Piece", "ToolCalls", "pointer"]

# The paths a document may cost: characters of paths built per character fed, plus a
# start that no ordinary call (short keys, shallow, streamed a token at a time) spends.
_PATH_CHARS_PER_CHAR: Final = 32
_PATH_CHARS_FREE: Final = 1 << 20

_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
# Plain string characters: everything but the quote, the backslash, control
# characters (invalid raw) and high surrogates (which may pair with the next).
_PLAIN: Final = re.compile(r'[^"\\\x00-\x1f\ud800-\udbff]+')
_SCALAR_CHARS: Final = re.compile(r"[0-9A-Za-z+\-.]*")
_ESCAPES: Final = {
    '"': '"',
    "\\": "\\",
    "/": "/",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")
_TOOL_KINDS: Final = frozenset({"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"})


def pointer(parent: str, key: str | int) -> str:
    """A child's JSON Pointer."""
    if isinstance(key, int):
        return f"{parent}/{key}"
    return f"{parent}/{key.replace('~', '~0').replace('/', '~1')}"


@dataclass(slots=True)
class Piece:
    """What one feed decoded at one path: string text (maybe `done`) or a scalar `value`;
    `raw`: input the decoder gave up decoding, as it was sent (at the root path)."""

    path: str
    text: str | None = None
    done: bool = False
    value: Any = None
    raw: bool = False

    def to_json(self) -> dict[str, Any]:
        if self.text is None:
            return {"path": self.path, "value": self.value}
        out: dict[str, Any] = {"path": self.path, "text": self.text}
        if self.done:
            out["done"] = True
        if self.raw:
            out["raw"] = True
        return out


class _GiveUp(Exception):
    """Decoding stops at `at` (an index in the delta being read): the rest goes raw."""

    def __init__(self, at: int) -> None:
        self.at = at


# What the decoder expects next.
_VALUE, _KEY_OR_END, _KEY, _COLON, _COMMA_OR_END, _VALUE_OR_END, _DONE = range(7)


@dataclass(slots=True)
class _Container:
    array: bool
    path: str
    index: int = 0


@dataclass(slots=True)
class _String:
    """A string being read: a value at `path`, or an object key (path None)."""

    path: str | None
    parts: list[str] = field(default_factory=list)
    # An escape cut by the delta's end: "\\", "\\u", "\\u00"...
    escape: str = ""
    # A high surrogate waiting for the character after it.
    high: str = ""
    opened: bool = False


class Decoder:
    """One streamed JSON document; see the module docstring."""

    def __init__(self) -> None:
        self._expect = _VALUE
        self._stack: list[_Container] = []
        self._string: _String | None = None
        self._key: str | None = None
        self._scalar: list[str] | None = None
        self._scalar_path = ""
        self._pieces: list[Piece] = []
        self.failed: str | None = None
        # Path characters built so far, and how many the input fed so far allows.
        self._spent = 0
        self._allowed = _PATH_CHARS_FREE
        # Decoding was given up: every later delta is passed on as raw text.
        self.raw = False

    @property
    def complete(self) -> bool:
        """The whole document has been read (a root number ends only at `finish`)."""
        return self._expect == _DONE

    def feed(self, delta: str) -> list[Piece]:
        """Decode the next delta; what it completed or added, in document order."""
        if self.raw:
            return [Piece("", text=delta, raw=True)] if delta else []
        if self.failed is None and delta:
            self._allowed += len(delta) * _PATH_CHARS_PER_CHAR
            try:
                self._consume(delta)
            except ValueError as exc:
                self.failed = str(exc)
                self._string = None
                self._scalar = None
            except _GiveUp as stop:
                self._give_up()
                self._pieces.append(Piece("", text=delta[stop.at :], raw=True))
        return self._take()

    def _give_up(self) -> None:
        self.raw = True
        self._stack = []
        self._string = None
        self._scalar = None

    def _spend(self, path: str, at: int) -> str:
        """`path`, charged to the paths' allowance; past it, decoding gives up at `at`."""
        self._spent += len(path)
        if self._spent > self._allowed:
            raise _GiveUp(at)
        return path

    def finish(self) -> list[Piece]:
        """The end of the input: a number at the root is complete now."""
        if self.failed is None and self._scalar is not None and not self._stack:
            try:
                self._end_scalar()
            except ValueError as exc:
                self.failed = str(exc)
        return self._take()

    # -- the scanner ---------------------------------------------------------

    def _take(self) -> list[Piece]:
        pieces, self._pieces = self._pieces, []
        return pieces

    def _path(self) -> str:
        """Where the value starting now sits."""
        if not self._stack:
            return ""
        top = self._stack[-1]
        if top.array:
            return pointer(top.path, top.index)
        assert self._key is not None
        return pointer(top.path, self._key)

    def _consume(self, text: str) -> None:
        i, n = 0, len(text)
        while i < n:
            if self._string is not None:
                i = self._read_string(text, i)
                continue
            if self._scalar is not None:
                match = _SCALAR_CHARS.match(text, i)
                assert match is not None
                self._scalar.append(match.group())
                i = match.end()
                if i == n:
                    return
                self._end_scalar()
                continue
            i = _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]
            if i == n:
                return
            ch = text[i]
            expect = self._expect
            if expect in (_VALUE, _VALUE_OR_END):
                if ch == "]" and expect == _VALUE_OR_END:
                    self._close(array=True)
                else:
                    self._begin_value(ch, i)
                i += 1
            elif expect in (_KEY_OR_END, _KEY):
                if ch == '"':
                    self._string = _String(None)
                elif ch == "}" and expect == _KEY_OR_END:
                    self._close(array=False)
                else:
                    raise ValueError(f"expected an object key, got {ch!r}")
                i += 1
            elif expect == _COLON:
                if ch != ":":
                    raise ValueError(f"expected ':', got {ch!r}")
                self._expect = _VALUE
                i += 1
            elif expect == _COMMA_OR_END:
                top = self._stack[-1]
                if ch == ",":
                    if top.array:
                        top.index += 1
                        self._expect = _VALUE
                    else:
                        self._expect = _KEY
                elif ch == ("]" if top.array else "}"):
                    self._close(array=top.array)
                else:
                    raise ValueError(f"expected ',' or a closing bracket, got {ch!r}")
                i += 1
            else:
                raise ValueError(f"unexpected {ch!r} after the end of the document")

    def _begin_value(self, ch: str, at: int) -> None:
        if ch in "[{" and len(self._stack) >= MAX_DEPTH:
            raise _GiveUp(at)
        path = self._spend(self._path(), at)
        if ch == '"':
            self._string = _String(path)
        elif ch == "{":
            self._stack.append(_Container(False, path))
            self._expect = _KEY_OR_END
        elif ch == "[":
            self._stack.append(_Container(True, path))
            self._expect = _VALUE_OR_END
        elif ch == "-" or ch.isdigit() or ch in "tfn":
            self._scalar = [ch]
            self._scalar_path = path
        else:
            raise ValueError(f"expected a value, got {ch!r}")

    def _close(self, *, array: bool) -> None:
        top = self._stack.pop()
        if top.array is not array:
            raise ValueError("mismatched closing bracket")
        self._value_ended()

    def _value_ended(self) -> None:
        self._expect = _COMMA_OR_END if self._stack else _DONE

    def _end_scalar(self) -> None:
        assert self._scalar is not None
        token = "".join(self._scalar)
        self._scalar = None
        try:
            value = json.loads(token)
        except ValueError:
            raise ValueError(f"{token[:40]!r} is not a JSON value") from None
        if isinstance(value, (dict, list, str)):
            raise ValueError(f"{token[:40]!r} is not a JSON scalar")
        self._pieces.append(Piece(self._scalar_path, value=value))
        self._value_ended()

    def _emit_text(self, s: _String, text: str, at: int, *, done: bool = False) -> None:
        """`text` of string `s` read from index `at` of this delta, onto this feed's pieces."""
        if s.path is None:
            s.parts.append(text)
            return
        if not text and not done and s.opened:
            return
        s.opened = True
        pieces = self._pieces
        if pieces and pieces[-1].path == s.path and pieces[-1].text is not None:
            last = pieces[-1]
            last.text = (last.text or "") + text
            last.done = done
        else:
            # Each feed's piece repeats the path in what is sent: charged like a new path.
            pieces.append(Piece(self._spend(s.path, at), text=text, done=done))

    def _read_string(self, text: str, i: int) -> int:
        """Read string characters from `i`; the index after what was taken."""
        s = self._string
        assert s is not None
        start = i
        n = len(text)
        out: list[str] = []
        while i < n:
            if s.escape:
                i = self._read_escape(s, text, i, out)
                continue
            if s.high:
                ch = text[i]
                if "\udc00" <= ch <= "\udfff":
                    out.append(_join(s.high, ch))
                    s.high = ""
                    i += 1
                    continue
                if ch == "\\":
                    # Maybe `\\uDC..` completes the pair: the escape reader decides.
                    s.escape = "\\"
                    i += 1
                    continue
                out.append(s.high)
                s.high = ""
            match = _PLAIN.match(text, i)
            if match is not None:
                out.append(match.group())
                i = match.end()
                continue
            ch = text[i]
            if ch == '"':
                self._string = None
                decoded = "".join(out)
                if s.path is None:
                    s.parts.append(decoded)
                    self._key = "".join(s.parts)
                    self._expect = _COLON
                else:
                    self._emit_text(s, decoded, start, done=True)
                    self._value_ended()
                return i + 1
            if ch == "\\":
                s.escape = "\\"
                i += 1
                continue
            if "\ud800" <= ch <= "\udbff":
                s.high = ch
                i += 1
                continue
            raise ValueError(f"control character {ch!r} inside a string")
        self._emit_text(s, "".join(out), start)
        return i

    def _read_escape(self, s: _String, text: str, i: int, out: list[str]) -> int:
        escape = s.escape
        n = len(text)
        if escape == "\\":
            ch = text[i]
            i += 1
            if ch == "u":
                s.escape = "\\u"
                return i
            simple = _ESCAPES.get(ch)
            if simple is None:
                raise ValueError(f"invalid escape \\{ch}")
            s.escape = ""
            if s.high:
                out.append(s.high)
                s.high = ""
            out.append(simple)
            return i
        take = min(6 - len(escape), n - i)
        escape += text[i : i + take]
        i += take
        if any(c not in _HEX for c in escape[2:]):
            raise ValueError(f"invalid escape {escape}")
        if len(escape) < 6:
            s.escape = escape
            return i
        s.escape = ""
        ch = chr(int(escape[2:], 16))
        if s.high:
            if "\udc00" <= ch <= "\udfff":
                out.append(_join(s.high, ch))
                s.high = ""
                return i
            out.append(s.high)
            s.high = ""
        if "\ud800" <= ch <= "\udbff":
            s.high = ch
        else:
            out.append(ch)
        return i


def _join(high: str, low: str) -> str:
    return chr(0x10000 + ((ord(high) - 0xD800) << 10) + (ord(low) - 0xDC00))


class ToolCalls:
    """One decoder per tool call in flight, fed by a run's chunks in seq order.

    `observe(chunk)` returns what a chunk decoded, or None: for a
    `TOOL_CALL_ARGS`, `{"toolCallId", "pieces": [...]}` (plus `"error"` once,
    when its arguments stop being JSON); for a `TOOL_CALL_END`, the pieces
    the end completed (a bare number) and `"complete"`, whether the
    arguments were a whole JSON document. Calls interleave freely: each keeps
    its own cursor.
    """

    def __init__(self) -> None:
        self._open: dict[str, Decoder] = {}

    def observe(self, chunk: dict[str, Any]) -> dict[str, Any] | None:
        kind = chunk.get("type")
        call_id = chunk.get("toolCallId")
        if type(call_id) is not str or kind not in _TOOL_KINDS:
            return None
        if kind == "TOOL_CALL_START":
            self._open[call_id] = Decoder()
            return None
        decoder = self._open.get(call_id)
        if kind == "TOOL_CALL_ARGS":
            delta = chunk.get("delta")
            if type(delta) is not str:
                return None
            if decoder is None:
                decoder = self._open[call_id] = Decoder()
            failed = decoder.failed
            pieces = decoder.feed(delta)
            out: dict[str, Any] = {
                "toolCallId": call_id,
                "pieces": [p.to_json() for p in pieces],
            }
            if failed is None and decoder.failed is not None:
                out["error"] = decoder.failed
            return out
        if decoder is None:
            return None
        del self._open[call_id]
        pieces = decoder.finish()
        return {
            "toolCallId": call_id,
            "pieces": [p.to_json() for p in pieces],
            "complete": decoder.complete,
        }
