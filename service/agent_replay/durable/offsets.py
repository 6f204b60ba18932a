"""Offsets: opaque to clients, a seq to us.

`0000000000000042_0000000000000000` is the position after seq 42 (what the
run API calls `after=42`, or `Last-Event-ID: 42`). Fixed-width decimal keeps
lexicographic order equal to seq order; the second field is always zero
(reserved), so offsets have the two-part shape clients of the reference
server already see. `-1` is the start, `now` the tail; neither is ever minted.
"""

from __future__ import annotations

import re
from typing import Final, Literal

from agent_replay.errors import InvalidOffset

NOW: Final = "now"
START: Final = "-1"
WIDTH: Final = 16
# Seqs past this cannot be written as offsets (the log's own limit is higher).
MAX_OFFSET_SEQ: Final = 10**WIDTH - 1

_OFFSET = re.compile(r"([0-9]{1,16})_([0-9]{1,16})")

Position = int | Literal["now"]


def format_offset(seq: int) -> str:
    return f"{seq:0{WIDTH}d}_{0:0{WIDTH}d}"


def parse_offset(text: str) -> Position:
    """`-1` → 0 (before the first event), `now` → "now", an offset → its seq."""
    if text == START:
        return 0
    if text == NOW:
        return NOW
    match = _OFFSET.fullmatch(text)
    if match is None:
        raise InvalidOffset(
            f"offset {text[:60]!r} is not -1, now or an offset this server returned",
            offset=text[:60],
        )
    return int(match.group(1))
