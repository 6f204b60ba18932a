"""SSE events of a stream (PROTOCOL.md 5.8): `event: data` then `event: control`."""

from __future__ import annotations

import base64

from agent_replay.log.chunks import dumps
from agent_replay.stream import sse


def data_event(payload: str) -> str:
    """One `data` event; each line of the payload its own `data:` line."""
    return sse.frame(payload, event="data", tight=True)


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
    return sse.json_frame(dumps(control), event="control", tight=True)
