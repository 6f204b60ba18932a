"""JavaScript value semantics the reference projector inherits.

TanStack's StreamProcessor is JavaScript; wherever its output depends on a JS
language rule, this module reproduces that rule for JSON-shaped Python values
(dict, list, str, int, float, bool, None):

* ``UNDEF`` stands for JS ``undefined`` (a key that is absent), distinct from
  ``None`` (JSON ``null``); rendering drops keys whose value is ``UNDEF``.
* truthiness, ``??``, ``String(x)`` and ``x || ""`` coercions;
* ``JSON.parse`` (strict: no NaN/Infinity, integers beyond 2**53 become
  doubles) and ``JSON.stringify`` (integer-like keys first, JS number text);
* ``String.prototype.trim`` whitespace;
* ``new Date(string)`` for ISO-8601, serialized like ``Date.toISOString``;
* UTF-16 surrogate halves that arrive in separate deltas and must rejoin.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from email.utils import parsedate_to_datetime
from itertools import accumulate
from typing import Any, Final


class _Undefined:
    """JS ``undefined``: the value of a missing key."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNDEF"

    def __bool__(self) -> bool:
        return False


UNDEF: Final = _Undefined()

MAX_SAFE = 2**53


def nullish(value: Any) -> bool:
    """``value == null`` in JS (null or undefined)."""
    return value is None or value is UNDEF


def coalesce(*values: Any) -> Any:
    """JS ``a ?? b ?? c``: the first value that is neither null nor undefined."""
    for value in values[:-1]:
        if value is not None and value is not UNDEF:
            return value
    return values[-1]


def truthy(value: Any) -> bool:
    """JS truthiness for JSON values: ``{}`` and ``[]`` are truthy, NaN is not."""
    if value is None or value is UNDEF or value is False:
        return False
    if isinstance(value, str):
        return value != ""
    if isinstance(value, (int, float)):
        return value == value and value != 0
    return True


def get(value: Any, key: str) -> Any:
    """``value.key`` (``value?.key``) for JSON values; primitives have no own keys."""
    if isinstance(value, dict):
        return value.get(key, UNDEF)
    return UNDEF


def spread(value: Any) -> dict[str, Any]:
    """``{...value}``: own enumerable keys; strings and arrays spread by index."""
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, (str, list)):
        return {str(i): item for i, item in enumerate(value)}
    return {}


def tanstack_bag(value: Any) -> dict[str, Any] | None:
    """``tanstackMetadata(value)``: ``value.metadata.tanstack`` or ``value.tanstack``."""
    if not isinstance(value, dict):
        return None
    nested = value.get("metadata", UNDEF)
    holder = nested if isinstance(nested, dict) else value
    bag = holder.get("tanstack")
    return bag if isinstance(bag, dict) else None


class _ObjectKey:
    """Map key for an object or array id: JS compares those by identity."""

    __slots__ = ("ref",)

    def __init__(self, ref: object) -> None:
        self.ref = ref

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ObjectKey) and other.ref is self.ref

    def __hash__(self) -> int:
        return id(self.ref)


def key_of(value: Any) -> Any:
    """A dict key with JS ``Map``/``===`` identity for any JSON value.

    Python would merge ``1``, ``1.0`` and ``True`` into one key and cannot hash
    a dict; JS keeps them apart.
    """
    if type(value) is str or value is UNDEF or value is None:
        return value
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("num", float(value))
    return _ObjectKey(value)


def same(a: Any, b: Any) -> bool:
    """JS ``a === b`` for JSON values."""
    if type(a) is str and type(b) is str:
        return a == b
    return bool(key_of(a) == key_of(b))


# --- strings -----------------------------------------------------------------

_HIGH = ("\ud800", "\udbff")
_SURROGATE = re.compile("[\ud800-\udfff]")


def ends_high_surrogate(text: str) -> bool:
    return bool(text) and _HIGH[0] <= text[-1] <= _HIGH[1]


def starts_low_surrogate(text: str) -> bool:
    return bool(text) and "\udc00" <= text[0] <= "\udfff"


def join_surrogates(text: str) -> str:
    """Rejoin surrogate pairs that were concatenated from two strings.

    JS strings are UTF-16, so ``"\\ud83d" + "\\ude80"`` is one character there;
    in Python it stays two code points until re-decoded.
    """
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def to_string(value: Any) -> str:
    """JS ``String(value)`` for JSON values."""
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is UNDEF:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return number_text(value)
    if isinstance(value, list):
        return ",".join("" if nullish(item) else to_string(item) for item in value)
    return "[object Object]"


def or_empty(value: Any) -> str:
    """The string a JS ``x || ""`` contributes to a concatenation."""
    if type(value) is str:
        return value
    return to_string(value) if truthy(value) else ""


# JS String.prototype.trim: WhiteSpace (TAB VT FF SP NBSP ZWNBSP + Zs) and
# LineTerminator (LF CR LS PS). Not U+001C-U+001F nor U+0085, unlike str.strip.
_JS_SPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
    "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def trim(text: str) -> str:
    return text.strip(_JS_SPACE)


# --- numbers -----------------------------------------------------------------


def number_text(value: int | float) -> str:
    """JS ``Number.prototype.toString()`` (also what JSON.stringify writes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int) and -MAX_SAFE <= value <= MAX_SAFE:
        return str(value)
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "0"
    if number < 0:
        return "-" + number_text(-number)
    _sign, digit_tuple, exponent = Decimal(repr(number)).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    k = len(digits)
    n = exponent + len(digit_tuple)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    e = n - 1
    mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
    return f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"


def _js_int(text: str) -> int | float:
    value = int(text)
    if -MAX_SAFE <= value <= MAX_SAFE:
        return value
    # A JS double; keep it an int spelled as JS prints it so it round-trips.
    number = float(text)
    if math.isinf(number) or abs(number) >= 1e21:
        return number
    return int(number_text(number))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_int=_js_int, parse_constant=_reject_constant)


class JSONParseError(ValueError):
    pass


class JSONTooDeep(JSONParseError):
    """Text nesting objects and arrays deeper than ``MAX_DEPTH``: kept as text, not parsed."""


MAX_DEPTH: Final = 200
"""How deeply a value parsed from text (tool arguments, tool results, stored chunks) may
nest objects and arrays. Every walk over projected values (the rendering, the transcripts,
the encoders) recurses, so a deeper value is kept as its text instead: tool arguments are
strings, which ingest cannot bound. The same number as ingest's bound on an event
(``agent_replay.log.chunks.MAX_EVENT_DEPTH``)."""

# A JSON string literal, or one cut at the end of the text (a partial document).
_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|$)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting(text: str) -> int:
    """How deeply JSON `text` (whole or cut) nests objects and arrays: linear, no recursion.

    The twin of ``agent_replay.log.chunks.nesting`` (the projector imports nothing of the log).
    """
    brackets = _NOT_BRACKET.sub("", _STRING_LITERAL.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON `text` (whole or cut) nests deeper than `limit`."""
    # It cannot nest deeper than it has openers: two C counts spare the scan.
    return text.count("[") + text.count("{") > limit and nesting(text) > limit


def parse_json(value: Any, *, max_depth: int | None = MAX_DEPTH) -> Any:
    """JS ``JSON.parse(value)``; raises JSONParseError where JS throws, and JSONTooDeep
    for text nested deeper than `max_depth` (None: our own output, already bounded).

    Like JS, a non-string argument is first converted with ``String()``.
    """
    text = value if type(value) is str else to_string(value)
    if max_depth is not None and too_deep(text, max_depth):
        raise JSONTooDeep(f"nested deeper than {max_depth} levels")
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise JSONParseError(str(exc)) from exc


def parse_chunk(text: str) -> Any:
    """A stored chunk's JSON text parsed, every value nested past ``MAX_DEPTH`` kept as
    its JSON text (a chunk stored before ingest bounded depth); None when even that
    cannot be parsed."""
    try:
        return parse_json(text)
    except JSONTooDeep:
        pass
    except JSONParseError:
        return None
    try:
        value = parse_json(text, max_depth=None)
    except JSONParseError:
        return None
    return _clamped(value)


def _raw_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except RecursionError:
        return "(a value nested too deeply to show)"


def _clamped(value: Any) -> Any:
    """`value` with each object or array past level ``MAX_DEPTH`` replaced by its JSON text.

    A walk with its own stack: the value may be as deep as the parser went."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        holder, depth = stack.pop()
        keys = holder.keys() if isinstance(holder, dict) else range(len(holder))
        for key in keys:
            item = holder[key]
            if isinstance(item, (dict, list)):
                if depth + 1 > MAX_DEPTH:
                    holder[key] = _raw_text(item)
                else:
                    stack.append((item, depth + 1))
    return value


_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


def _is_array_index(key: str) -> bool:
    return _ARRAY_INDEX.fullmatch(key) is not None and int(key) < 2**32 - 1


def _string_literal(text: str) -> str:
    literal = json.dumps(text, ensure_ascii=False)
    if _SURROGATE.search(literal):
        # JSON.stringify escapes lone surrogates; json.dumps leaves them raw.
        literal = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", join_surrogates(literal))
    return literal


def stringify(value: Any) -> str:
    """JS ``JSON.stringify(value)`` with no indentation, for JSON values."""
    if isinstance(value, str):
        return _string_literal(value)
    if value is None or value is UNDEF:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            return "null"
        return number_text(value)
    if isinstance(value, list):
        return "[" + ",".join(stringify(item) for item in value) + "]"
    if isinstance(value, dict):
        keys = [k for k in value if value[k] is not UNDEF]
        ordered = sorted((k for k in keys if _is_array_index(k)), key=int)
        ordered += [k for k in keys if not _is_array_index(k)]
        body = ",".join(_string_literal(k) + ":" + stringify(value[k]) for k in ordered)
        return "{" + body + "}"
    return "null"


# --- dates -------------------------------------------------------------------

_ISO_DATE = re.compile(
    r"(?P<year>[+-]\d{6}|\d{4})(?:-(?P<month>\d{1,2})(?:-(?P<day>\d{1,2}))?)?"
    r"(?:[Tt ](?P<hour>\d{2}):(?P<minute>\d{2})"
    r"(?::(?P<second>\d{2})(?:[.,](?P<fraction>\d+))?)?"
    r"(?P<zone>[Zz]|[+-]\d{2}:?\d{2})?)?"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX_MS = 8.64e15


def parse_date(value: Any) -> str | None:
    """``coerceCreatedAt``: a valid JS date from a date string, as
    ``toISOString()`` text; None when V8 gives an Invalid Date.

    ISO-8601 as V8 reads it (days 29-31 roll over into the next month, 24:00
    is midnight after) and RFC 2822. Times without an offset are read as UTC
    (the corpus was produced in UTC; JS would use the local zone).
    """
    if not isinstance(value, str):
        return None
    text = value.strip()
    match = _ISO_DATE.fullmatch(text)
    if match is None:
        return _parse_rfc2822(text)
    parts = match.groupdict()
    if parts["year"] == "-000000":
        return None
    year = int(parts["year"])
    month = int(parts["month"] or 1)
    day = int(parts["day"] or 1)
    hour = int(parts["hour"] or 0)
    minute = int(parts["minute"] or 0)
    second = int(parts["second"] or 0)
    millis = int((parts["fraction"] or "0")[:3].ljust(3, "0"))
    if not (1 <= month <= 12 and 1 <= day <= 31 and minute < 60 and second < 60):
        return None
    if hour > 24 or (hour == 24 and (minute or second or millis)):
        return None
    offset = 0
    zone = parts["zone"]
    if zone and zone not in "Zz":
        digits = zone[1:].replace(":", "")
        offset = (int(digits[:2]) * 60 + int(digits[2:])) * (1 if zone[0] == "+" else -1)
    days = _days_from_civil(year, month, 1) + day - 1
    ms = ((days * 24 + hour) * 60 + minute - offset) * 60_000 + second * 1000 + millis
    if abs(ms) > _MAX_MS:
        return None
    return iso_from_ms(ms)


def _parse_rfc2822(text: str) -> str | None:
    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return iso_from_ms((moment - _EPOCH) // timedelta(milliseconds=1))


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 in the proleptic Gregorian calendar, any year."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def iso_from_ms(ms: int | float) -> str:
    """``new Date(ms).toISOString()``."""
    whole = int(ms)
    days, rest = divmod(whole, 86_400_000)
    try:
        m = _EPOCH + timedelta(days=days, milliseconds=rest)
    except OverflowError:  # beyond Python's years 1-9999; keep the text valid
        m = _EPOCH
    return (
        f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
        f".{rest % 1000:03d}Z"
    )
