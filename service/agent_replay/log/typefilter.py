"""Which chunk types a reader asked for: `TEXT_MESSAGE_*,TOOL_CALL_START`.

A comma-separated list of types, each exact or ending in `*` (a prefix
wildcard: `TOOL_CALL_*`, or `*` alone for everything). Shared by the stream
(which tests each chunk it sends) and the audit's event pages (which turn it
into SQL), so both read a filter the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from agent_replay.errors import InvalidTypes

_TYPE = re.compile(r"[A-Za-z0-9_.:\-]{1,128}")
MAX_PATTERNS = 64


@dataclass(frozen=True, slots=True)
class TypeFilter:
    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @property
    def everything(self) -> bool:
        return "" in self.prefixes

    def matches(self, kind: str) -> bool:
        return kind in self.exact or kind.startswith(self.prefixes)

    @classmethod
    def parse(cls, values: str | Iterable[str]) -> TypeFilter:
        """Parse `?types=` (one value or the repeated parameter's values).

        Raises `InvalidTypes` (400) for an empty list, a `*` anywhere but at
        the end, or a character no chunk type here uses.
        """
        texts = [values] if isinstance(values, str) else list(values)
        patterns = [p.strip() for text in texts for p in text.split(",") if p.strip()]
        if not patterns:
            raise InvalidTypes("types is empty: name at least one chunk type or prefix*")
        if len(patterns) > MAX_PATTERNS:
            raise InvalidTypes(f"types names more than {MAX_PATTERNS} patterns")
        exact: set[str] = set()
        prefixes: list[str] = []
        for pattern in patterns:
            stem = pattern[:-1] if pattern.endswith("*") else pattern
            if not (stem == "" and pattern == "*") and not _TYPE.fullmatch(stem):
                raise InvalidTypes(
                    f"types pattern {pattern[:60]!r} is not a chunk type, optionally "
                    "ending in * (letters, digits, _ . : -)"
                )
            if pattern.endswith("*"):
                prefixes.append(stem)
            else:
                exact.add(stem)
        return cls(frozenset(exact), tuple(sorted(set(prefixes))))
