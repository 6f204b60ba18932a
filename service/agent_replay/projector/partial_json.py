"""Partial JSON for the structured-output ``partial`` field (spec §11).

The reference parses with npm ``partial-json`` 0.1.7 (every partial kind
allowed) behind a wrapper that turns blank input and any exception into "no
value". That parser is not only tolerant of cut-off input, it is lenient on
malformed input in specific ways (``{"a":1} trailing`` -> ``{"a": 1}``,
``[1,,2]`` -> ``[1]``, ``[12.`` -> ``[]``), and the conformance corpus records
those results. PyPI ``partial-json-parser`` agrees on prefixes of well-formed
JSON except numbers cut after ``.``/``E``, and raises on malformed input, so
wrapping it cannot produce the reference's values; this module reproduces the
reference algorithm instead (its quirks are noted where they happen).

A complete document takes a fast path through the C JSON decoder: for valid
JSON the reference returns exactly ``JSON.parse``'s value.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

from agent_replay.projector.jsvalues import JSONParseError, parse_json, too_deep, trim


class _NoValue:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: Final = _NoValue()


class _Incomplete(Exception):
    """partial-json's PartialJSON error."""


class _Malformed(Exception):
    """partial-json's MalformedJSON error."""


# The body of a string literal up to its closing quote: escape pairs or
# anything but a quote or backslash (partial-json's escape-toggle loop).
_STRING_BODY = re.compile(r'(?:[^"\\]|\\[\s\S])*')
_BLANK = " \n\r\t"
_LITERALS: Final[tuple[tuple[str, Any, int], ...]] = (
    ("null", None, 0),
    ("true", True, 0),
    ("false", False, 0),
    ("Infinity", math.inf, 0),
    # "-" alone is not taken as a cut "-Infinity" (it needs two characters).
    ("-Infinity", -math.inf, 1),
    ("NaN", math.nan, 0),
)


def _substring(text: str, start: int, end: int) -> str:
    """JS ``String.prototype.substring``: clamps to the string, swaps if reversed."""
    size = len(text)
    start = min(max(start, 0), size)
    end = min(max(end, 0), size)
    if start > end:
        start, end = end, start
    return text[start:end]


class _Parser:
    __slots__ = ("i", "n", "s")

    def __init__(self, text: str) -> None:
        self.s = text
        self.n = len(text)
        self.i = 0

    def char(self) -> str:
        return self.s[self.i] if self.i < self.n else ""

    def skip_blank(self) -> None:
        s, n = self.s, self.n
        while self.i < n and s[self.i] in _BLANK:
            self.i += 1

    def any(self) -> Any:
        self.skip_blank()
        if self.i >= self.n:
            raise _Incomplete
        c = self.s[self.i]
        if c == '"':
            return self.string()
        if c == "{":
            return self.object()
        if c == "[":
            return self.array()
        rest = self.s[self.i :]
        for word, value, min_rest in _LITERALS:
            if rest.startswith(word) or (
                min_rest < len(rest) < len(word) and word.startswith(rest)
            ):
                self.i += len(word)
                return value
        return self.number()

    def string(self) -> Any:
        # Called on whatever character is current: like the reference, the
        # first character is taken to be the opening quote without a check.
        s, start = self.s, self.i
        end = _STRING_BODY.match(s, start + 1).end()  # type: ignore[union-attr]
        dangling = end < self.n and s[end] == "\\"
        self.i = self.n if dangling else end
        if self.i < self.n and s[self.i] == '"':
            self.i += 1
            try:
                return parse_json(s[start : self.i])
            except JSONParseError as exc:
                raise _Malformed from exc
        try:
            return parse_json(s[start : self.i - dangling] + '"')
        except JSONParseError:
            # An invalid escape was cut (\u12): retry before the last backslash
            # of the whole input; if that fails too the error propagates.
            return parse_json(_substring(s, start, s.rfind("\\")) + '"')

    def object(self) -> dict[str, Any]:
        self.i += 1
        self.skip_blank()
        result: dict[str, Any] = {}
        try:
            while self.char() != "}":
                self.skip_blank()
                if self.i >= self.n:
                    return result
                key = self.string()
                self.skip_blank()
                self.i += 1  # the colon, or whatever stands there
                try:
                    value = self.any()
                except Exception:
                    return result
                if key != "__proto__":  # JS assigns the prototype: no own key
                    result[key] = value
                self.skip_blank()
                if self.char() == ",":
                    self.i += 1
        except Exception:
            return result
        self.i += 1
        return result

    def array(self) -> list[Any]:
        self.i += 1
        result: list[Any] = []
        try:
            while self.char() != "]":
                result.append(self.any())
                self.skip_blank()
                if self.char() == ",":
                    self.i += 1
        except Exception:
            return result
        self.i += 1
        return result

    def number(self) -> Any:
        s = self.s
        if self.i == 0:
            if s == "-":
                raise _Malformed
            try:
                return parse_json(s)
            except JSONParseError:
                return self.number_before_e(0)
        start = self.i
        if s[self.i] == "-":
            self.i += 1
        while self.i < self.n and s[self.i] not in ",]}":
            self.i += 1
        token = s[start : self.i]
        try:
            return parse_json(token)
        except JSONParseError:
            if token == "-":
                raise _Incomplete from None
            return self.number_before_e(start)

    def number_before_e(self, start: int) -> Any:
        # A cut exponent ("34.5e") is retried without it. Quirk: the cut is at
        # the last lower-case "e" of the whole input, not of the number.
        try:
            return parse_json(_substring(self.s, start, self.s.rfind("e")))
        except JSONParseError:
            raise _Malformed from None


def parse_partial(text: str) -> Any:
    """The reference's ``parsePartialJSON``: a value, or NO_VALUE."""
    if not text:
        return NO_VALUE
    trimmed = trim(text)
    if not trimmed or too_deep(trimmed):
        return NO_VALUE  # too deep: this parser recurses per level, and so would its readers
    if "__proto__" not in trimmed:
        try:
            return parse_json(trimmed)
        except JSONParseError:
            pass
    try:
        return _Parser(trimmed).any()
    except (Exception, RecursionError):
        return NO_VALUE
