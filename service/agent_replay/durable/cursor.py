"""`Stream-Cursor` for live reads (PROTOCOL.md 10.1): CDN collapsing without cache loops.

The cursor is the number of 20-second intervals since 2024-10-09T00:00Z; a
client cursor at or past the current interval is answered with a strictly
greater one (1-3600 s of jitter), so cursors never go backwards.
"""

from __future__ import annotations

import random
import time

EPOCH_SECONDS = 1728432000  # 2024-10-09T00:00:00Z
INTERVAL_SECONDS = 20
_JITTER = (1, 3600)


def current_interval(now: float | None = None) -> int:
    return int(((time.time() if now is None else now) - EPOCH_SECONDS) // INTERVAL_SECONDS)


def response_cursor(client: str | None, now: float | None = None) -> str:
    current = current_interval(now)
    if not client or not client.isdigit() or len(client) > 18:
        return str(current)
    theirs = int(client)
    if theirs < current:
        return str(current)
    jitter = random.randint(*_JITTER)
    return str(theirs + max(1, -(-jitter // INTERVAL_SECONDS)))
