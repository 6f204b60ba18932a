"""Streams re-encoded for other clients: a run's events, parsed, through a pure encoder.

The plain stream splices stored chunk text into its frames; the AI SDK and
AG-UI endpoints instead fold each event through an encoder
(`agent_replay.projector.ai_sdk`, `agent_replay.projector.agui`) and frame what it
returns, as a stateful framer of the same follower (`agent_replay.stream.tail`),
so replay, live tail and exactly-once delivery are the stream's, unchanged. Each frame
that ends a log event's output carries that event's seq as its SSE `id:`, so
a `Last-Event-ID` reconnect works as on the plain stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.responses import Response

from agent_replay.api.deps import AppState
from agent_replay.api.sse import STREAM_HEADERS, StreamResponse
from agent_replay.log.chunks import dumps, loads
from agent_replay.stream import Plan, sse, tail
from agent_replay.stream.framing import Row
from agent_replay.stream.outlet import Outlet


@dataclass(frozen=True, slots=True)
class EncoderFramer:
    """A stateful framer (`agent_replay.stream.framing.Framer`): each stored event, parsed,
    through `encode`, its output as SSE frames. Called once per row, in seq order."""

    encode: Callable[[Any], list[dict[str, Any]]]

    @property
    def key(self) -> Hashable | None:
        return None

    def frame(self, rows: Sequence[Row]) -> bytes:
        return "".join(sse_frames(self.encode(loads(text)), seq) for seq, text in rows).encode()


def events_after(
    state: AppState,
    plan: Plan,
    encode: Callable[[Any], list[dict[str, Any]]],
    outlet: Outlet | None = None,
) -> AsyncIterator[bytes]:
    """The run's events after the plan's cursor, encoded and framed, until it closes;
    with the response's `outlet`, a caught-up follower's by the commit (see `tail`)."""
    return tail(state.hub, plan, EncoderFramer(encode), outlet=outlet)


async def events_upto(state: AppState, run_id: str, upto: int) -> AsyncIterator[Any]:
    """The run's stored events with seq <= upto, parsed, in order."""
    after = 0
    while after < upto:
        page = await state.log.read_events(run_id, after, min(1000, upto - after))
        if not page:
            return
        for event in page:
            yield loads(event.chunk)
        after = page[-1].seq


def sse_frames(chunks: list[dict[str, Any]], seq: int | None) -> str:
    """A frame per chunk; the last one carries the id of the event they came from."""
    frames = [sse.json_frame(dumps(chunk)) for chunk in chunks[:-1]]
    if chunks:
        frames.append(sse.json_frame(dumps(chunks[-1]), id=seq))
    return "".join(frames)


def sse_response(
    body: AsyncIterator[bytes],
    state: AppState,
    headers: dict[str, str],
    outlet: Outlet | None = None,
) -> Response:
    settings = state.settings
    return StreamResponse(
        body,
        # Exactly this, without Starlette's "; charset=utf-8": what the AI SDK's server sends.
        headers={**STREAM_HEADERS, "Content-Type": "text/event-stream", **headers},
        media_type="text/event-stream",
        ping=settings.heartbeat_seconds,
        send_timeout=settings.stream_send_timeout_seconds,
        outlet=outlet,
    )
