"""Redaction rules: the built-in detectors, custom `name=regex` rules, and what each may cost.

A rule's *window* is the longest text it can match: the most characters a stream of
deltas holds back while a match may still be in progress. Every window is computed from
the pattern itself (the stdlib parser's width), so a pattern that can match unbounded
text is refused rather than trusted, and so is one whose backtracking could grow faster
than its text (a quantifier around another quantifier, around an alternation, or a
backreference). Matching uses the `regex` package for its partial matches: a stream holds
back only text that could still become a match, not a whole window of every message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

# The stdlib's own parser of `re` patterns: the one place that knows a pattern's width.
# Imported by its 3.11 name (the old `sre_parse` warns on import).
from re import _parser as _sre  # type: ignore[attr-defined]
from typing import Any

import regex

from agent_replay.errors import InvalidRedaction

NAME = re.compile(r"[a-z][a-z0-9_]{0,39}")
DEFAULT_MAX_WINDOW = 1024


def _luhn(text: str) -> bool:
    digits = [ord(c) - 48 for c in text if "0" <= c <= "9"]
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return 13 <= len(digits) <= 19 and total % 10 == 0


_PEM = r"-----BEGIN (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY-----"
_PEM_END = r"-----END (?:[A-Z0-9]{1,12} ){0,3}PRIVATE KEY-----"

# name -> (pattern, check on the matched text). Each pattern is bounded: its window is
# computed like a custom rule's. The private key takes its body up to the END line or, with
# no END line, all that could be a PEM body after it (a key cut short is still taken whole).
BUILTIN: dict[str, tuple[str, Callable[[str], bool] | None]] = {
    "openai_key": (r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,200}", None),
    "anthropic_key": (r"\bsk-ant-[A-Za-z0-9_\-]{20,200}", None),
    "aws_access_key": (r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", None),
    "github_token": (r"\b(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,251})", None),
    "jwt": (r"\beyJ[A-Za-z0-9_\-]{4,1000}\.eyJ[A-Za-z0-9_\-]{2,3000}\.[A-Za-z0-9_\-]{8,1000}",
            None),
    "private_key": (_PEM + r"(?:[A-Za-z0-9+/=\s:,\-]{0,5000}?" + _PEM_END
                    + r"|[A-Za-z0-9+/=\s:,\-]{0,5000})", None),
    "card": (r"(?<![0-9])[0-9](?:[ \-]?[0-9]){12,18}(?![0-9])", _luhn),
    "email": (r"[A-Za-z0-9._%+\-]{1,64}@[A-Za-z0-9\-]{1,63}(?:\.[A-Za-z0-9\-]{1,63}){0,8}"
              r"\.[A-Za-z]{2,24}\b", None),
}  # fmt: skip
DEFAULT_SET = tuple(BUILTIN)

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT, getattr(_sre, "POSSESSIVE_REPEAT", _sre.MAX_REPEAT)}


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    source: str  # the pattern as written
    pattern: regex.Pattern[str]
    window: int
    check: Callable[[str], bool] | None = None

    @property
    def marker(self) -> str:
        return f"[REDACTED:{self.name}]"


def _walk(items: Any, inside_repeat: bool, what: str) -> None:
    """Refuse what lets backtracking outgrow the text: nested quantifiers, alternations
    under a quantifier, backreferences."""
    for op, arg in items:
        if op in (_sre.GROUPREF, _sre.GROUPREF_EXISTS):
            raise InvalidRedaction(f"{what}: backreferences are not allowed")
        if op in _REPEATS:
            if inside_repeat:
                raise InvalidRedaction(
                    f"{what}: a quantifier inside another quantifier can cost more than its "
                    "text; use one quantifier over a character class"
                )
            _walk(arg[2], True, what)
        elif op is _sre.BRANCH:
            if inside_repeat:
                raise InvalidRedaction(
                    f"{what}: an alternation under a quantifier can cost more than its text; "
                    "use a character class"
                )
            for branch in arg[1]:
                _walk(branch, inside_repeat, what)
        elif op is _sre.SUBPATTERN:
            _walk(arg[-1], inside_repeat, what)
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            _walk(arg[1], inside_repeat, what)
        elif op is getattr(_sre, "ATOMIC_GROUP", None):
            _walk(arg, inside_repeat, what)


def compile_rule(
    name: str,
    source: str,
    max_window: int,
    check: Callable[[str], bool] | None = None,
    *,
    builtin: bool = False,
) -> Rule:
    what = f"redaction rule {name!r}"
    if not NAME.fullmatch(name):
        raise InvalidRedaction(f"{what}: a name is 1-40 of a-z 0-9 _, starting with a letter")
    try:
        parsed = _sre.parse(source)
    except re.error as exc:
        raise InvalidRedaction(f"{what}: not a regular expression: {exc}") from None
    if not builtin:  # the built-ins' nested groups are bounded and reviewed
        _walk(parsed, False, what)
    low, high = parsed.getwidth()
    if low == 0:
        raise InvalidRedaction(f"{what}: it can match empty text")
    if high > max_window:
        bound = "unbounded text" if high >= _sre.MAXREPEAT else f"{high} characters"
        raise InvalidRedaction(
            f"{what}: it can match {bound}, over the window of {max_window} "
            "(REPLAY_REDACT_MAX_WINDOW): bound every quantifier"
        )
    try:
        pattern = regex.compile(source, regex.VERSION0)
    except regex.error as exc:
        raise InvalidRedaction(f"{what}: not a regular expression: {exc}") from None
    return Rule(name, source, pattern, int(high), check)


def _builtin(name: str) -> Rule:
    source, check = BUILTIN[name]
    return compile_rule(name, source, 1 << 20, check, builtin=True)


_BUILTINS = {name: _builtin(name) for name in BUILTIN}


@dataclass(frozen=True, slots=True)
class RuleSet:
    rules: tuple[Rule, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    @property
    def names(self) -> list[str]:
        return [r.name for r in self.rules]

    @property
    def window(self) -> int:
        return max((r.window for r in self.rules), default=0)

    def describe(self) -> list[str]:
        """The rules as configuration names them (a built-in by name, a custom one as
        `name=regex`)."""
        return [r.name if r.name in _BUILTINS else f"{r.name}={r.source}" for r in self.rules]

    def plus(self, other: RuleSet) -> RuleSet:
        """These rules and `other`'s: a rule is only ever added, never replaced."""
        have = {r.name: r for r in self.rules}
        added = list(self.rules)
        for rule in other.rules:
            mine = have.get(rule.name)
            if mine is None:
                added.append(rule)
                have[rule.name] = rule
            elif mine.source != rule.source:
                raise InvalidRedaction(
                    f"redaction rule {rule.name!r} is already defined with another pattern"
                )
        return RuleSet(tuple(added))


NONE = RuleSet()


def _items(spec: str) -> list[str]:
    """`REPLAY_REDACT`'s items: a comma inside a custom pattern (`x=[0-9]{1,8}`) stays in
    it, since what follows it is not a rule name (`8}`); a comma followed by a bare name
    inside a pattern must be written `\\x2c`."""
    items: list[str] = []
    for piece in spec.split(","):
        head = piece.strip().partition("=")[0]
        if items and "=" in items[-1] and not NAME.fullmatch(head.strip()):
            items[-1] += "," + piece
        else:
            items.append(piece)
    return [i.strip() for i in items if i.strip()]


def parse_rules(
    spec: str | Sequence[Any] | None, where: str, max_window: int = DEFAULT_MAX_WINDOW
) -> RuleSet:
    """Rules from `REPLAY_REDACT` (comma-separated) or a JSON list (an agent's, a run's):
    detector names, `default` (every built-in) and `name=regex` pairs."""
    if spec is None:
        return NONE
    if isinstance(spec, str):
        items: Iterable[Any] = _items(spec)
    elif isinstance(spec, (list, tuple)):
        items = spec
    else:
        raise InvalidRedaction(f"{where}: redact must be a list of rule names or name=regex")
    rules = NONE
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise InvalidRedaction(f"{where}: each redaction rule is a non-empty string")
        item = item.strip()
        name, eq, source = item.partition("=")
        name = name.strip()
        if not eq:
            if name == "default":
                found = [_BUILTINS[n] for n in DEFAULT_SET]
            elif name in _BUILTINS:
                found = [_BUILTINS[name]]
            else:
                known = ", ".join(["default", *BUILTIN])
                raise InvalidRedaction(f"{where}: no detector named {name!r} (known: {known})")
        elif name in _BUILTINS or name == "default":
            raise InvalidRedaction(f"{where}: {name!r} is a built-in detector's name")
        else:
            found = [compile_rule(name, source, max_window)]
        rules = rules.plus(RuleSet(tuple(found)))
    return rules
