"""SSE framing of a stream (PROTOCOL.md 5.8): `event: data` then `event: control`."""

from __future__ import annotations

import base64
import re

from agent_replay.log.chunks import dumps

_LINES = re.compile(r"\r\n|\r|\n")


def data_event(payload: str) -> str:
    """One `data` event; each line of the payload its own `data:` line."""
    lines = _LINES.split(payload) if ("\n" in payload or "\r" in payload) else [payload]
    return "event: data\n" + "".join(f"data:{line}\n" for line in lines) + "\n"


def base64_payload(data: bytes) -> str:
    return base64.b64encode(data).decode()


def control_event(next_offset: str, *, cursor: str | None, up_to_date: bool, closed: bool) -> str:
    control: dict[str, object] = {"streamNextOffset": next_offset}
    if closed:
        control["streamClosed"] = True
        control["upToDate"] = True
    else:
        if cursor is not None:
            control["streamCursor"] = cursor
        if up_to_date:
            control["upToDate"] = True
    return "event: control\ndata:" + dumps(control) + "\n\n"
