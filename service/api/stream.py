"""`GET /v1/runs/{run_id}/stream`: replay after an offset, then tail live (SSE or NDJSON).

`stream_response` is the reusable part: anything that answers with a run's
stream (this route, the chat endpoint's POST and join) calls it with a run id
and, optionally, an offset and an Accept value it already resolved.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from sse_starlette import ServerSentEvent
from starlette.responses import Response

from service.api.deps import AppState, StateDep
from service.api.models import ERRORS
from service.api.sse import StreamResponse
from service.stream import Encoding, Offset, choose_encoding, parse_offset, plan_stream, tail
from service.stream.framing import sse_preamble
from service.stream.tail import resolve_offset

router = APIRouter(prefix="/v1/runs", tags=["stream"], responses=ERRORS)

# sse-starlette adds X-Accel-Buffering itself; no-cache (not its default
# no-store) is what the issue and TanStack's reference server send.
STREAM_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class _BlankLine(ServerSentEvent):
    """The NDJSON keepalive.

    Deliberate divergence from sse-starlette: its ping is an SSE comment,
    which an NDJSON reader would parse as JSON and fail on. TanStack's line
    reader skips blank lines, so the keepalive is a bare newline, sent by the
    library's own ping task all the same.
    """

    def encode(self) -> bytes:
        return b"\n"


async def stream_response(
    request: Request,
    state: AppState,
    run_id: str,
    *,
    offset: Offset | str | None = None,
    accept: str | None = None,
) -> Response:
    """The run's stream after `offset` (else `Last-Event-ID`, else `?offset=`, else the start).

    Errors (404, 409 offset_out_of_range, 400 invalid_offset) are raised
    before any byte is sent. A closed run the client has entirely gets 204.
    """
    if offset is None:
        offset = resolve_offset(
            request.headers.get("last-event-id"), request.query_params.get("offset")
        )
    elif isinstance(offset, str):
        offset = parse_offset(offset)
    encoding = choose_encoding(
        request.headers.get("accept") if accept is None else accept,
        request.query_params.get("format"),
    )
    plan = await plan_stream(state.hub, run_id, offset)
    if plan.exhausted:
        # The SSE specification's "do not reconnect".
        return Response(status_code=204, headers=STREAM_HEADERS)
    settings = state.settings
    sse = encoding is Encoding.SSE
    # Divergence from sse-starlette's usual use: the generator yields bytes,
    # each a pre-framed page of many events, which the library sends as they
    # are (`ensure_bytes`), instead of one ServerSentEvent per send; one write
    # per event caps catch-up at a fraction of the throughput.
    body = tail(
        state.hub, plan, encoding, preamble=sse_preamble(settings.stream_retry_ms) if sse else b""
    )
    options: dict[str, Any] = {} if sse else {"ping_message_factory": _BlankLine}
    return StreamResponse(
        body,
        headers=STREAM_HEADERS,
        media_type=encoding.media_type,
        ping=settings.heartbeat_seconds,
        sep="\n",
        send_timeout=settings.stream_send_timeout_seconds,
        **options,
    )


@router.get(
    "/{run_id}/stream",
    responses={
        200: {
            "description": "SSE (`id:` = seq, `data:` = the chunk) or NDJSON "
            '(`{"id": "<seq>", "chunk": {...}}` per line), replay then live, '
            "ending once the run is closed and delivered",
            "content": {"text/event-stream": {}, "application/x-ndjson": {}},
        },
        204: {"description": "The run is closed and the client has all of it"},
    },
)
async def stream_run(
    request: Request,
    state: StateDep,
    run_id: Annotated[str, Path(description="1-128 characters of A-Z a-z 0-9 . _ : -")],
    offset: Annotated[
        str | None,
        Query(description="-1 (from the start), now, or the last seq seen; Last-Event-ID wins"),
    ] = None,
    format: Annotated[str | None, Query(description="sse or ndjson; overrides Accept")] = None,
) -> Response:
    """Replay the run's events after the offset, then tail them live until the run closes."""
    return await stream_response(request, state, run_id)
