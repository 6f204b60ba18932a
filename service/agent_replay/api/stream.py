"""`GET /v1/runs/{run_id}/stream`: replay after an offset, then tail live (SSE or NDJSON).

`stream_response` is the reusable part: anything that answers with a run's
stream (this route, the chat endpoint's POST and join) calls it with a run id
and, optionally, an offset and an Accept value it already resolved.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_replay.api.auth import READ_RUN, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.decoded import DecodedFramer
from agent_replay.api.deps import AppState, StateDep
from agent_replay.api.models import ERRORS
from agent_replay.api.sse import STREAM_HEADERS, StreamResponse, blank_line
from agent_replay.errors import InvalidRequest
from agent_replay.log.typefilter import TypeFilter
from agent_replay.stream import (
    Encoding,
    Offset,
    choose_encoding,
    parse_offset,
    plan_stream,
    sse,
    tail,
)
from agent_replay.stream.audience import AudienceFramer, audience_framer
from agent_replay.stream.framing import Framer
from agent_replay.stream.outlet import Outlet
from agent_replay.stream.tail import resolve_offset
from agent_replay.stream.thread import ThreadFramer

# What a stream response wraps: given the preamble and the response's outlet, the body.
Follow = Callable[[bytes, Outlet], AsyncIterator[bytes]]

router = APIRouter(prefix="/v1/runs", tags=["stream"], responses=ERRORS, route_class=GuardedRoute)


async def stream_response(
    request: Request,
    state: AppState,
    run_id: str,
    *,
    offset: Offset | str | None = None,
    accept: str | None = None,
    audience: bool = False,
) -> Response:
    """The run's stream after `offset` (else `Last-Event-ID`, else `?offset=`, else the start).

    With `audience`, the request's `?types=`, `?events=` and `?view=` shape
    what is sent (the run stream route; the chat endpoints stream as
    TanStack reads them). Errors (404, 409 offset_out_of_range, 400
    invalid_offset, invalid_types) are raised before any byte is sent. A
    closed run the client has entirely gets 204.
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
    framer_options = audience_options(request) if audience else None
    plan = await plan_stream(state.hub, run_id, offset)
    if plan.exhausted:
        # The SSE specification's "do not reconnect".
        return Response(status_code=204, headers=STREAM_HEADERS)
    # The generator yields bytes, each a pre-framed page of many events, sent
    # as they are: one write per event would cap catch-up at a fraction of
    # the throughput.
    framer: Framer = encoding
    if framer_options is not None:
        framer = await audience_framer_at(state, run_id, plan.cursor, encoding, framer_options)
    return stream_reply(
        state,
        encoding,
        lambda preamble, outlet: tail(state.hub, plan, framer, preamble=preamble, outlet=outlet),
    )


def audience_options(request: Request) -> tuple[TypeFilter | None, bool, bool]:
    params = request.query_params
    types = params.getlist("types")
    events = params.get("events")
    view = params.get("view")
    if events not in (None, "named"):
        raise InvalidRequest(f"events must be 'named' (or omitted), not {events[:40]!r}")
    if view not in (None, "decoded"):
        raise InvalidRequest(f"view must be 'decoded' (or omitted), not {view[:40]!r}")
    return (TypeFilter.parse(types) if types else None), events == "named", view == "decoded"


async def audience_framer_at(
    state: AppState,
    run_id: str,
    seq: int,
    encoding: Encoding,
    options: tuple[TypeFilter | None, bool, bool],
) -> Framer:
    """The framer `audience_options` asks for, for a run followed after `seq`.

    A decoded view is primed with the events up to `seq` so that a resumed
    tool call decodes as it would have from the start.
    """
    types, named, decoded = options
    if not decoded:
        return audience_framer(encoding, types, named)
    return await _decoded_at(state, run_id, seq, encoding, options, "")


async def thread_framer_at(
    state: AppState,
    run_id: str,
    seq: int,
    encoding: Encoding,
    options: tuple[TypeFilter | None, bool, bool],
) -> ThreadFramer:
    """As `audience_framer_at`, for a run of a thread's stream: its ids name the run
    (`<run_id>:<seq>`, then the other runs' places: `agent_replay.stream.thread`)."""
    types, named, decoded = options
    if not decoded:
        only = None if types is None or types.everything else types
        return AudienceFramer(encoding, only, named, f"{run_id}:")
    return await _decoded_at(state, run_id, seq, encoding, options, f"{run_id}:")


async def _decoded_at(
    state: AppState,
    run_id: str,
    seq: int,
    encoding: Encoding,
    options: tuple[TypeFilter | None, bool, bool],
    prefix: str,
) -> DecodedFramer:
    types, named, _ = options
    only = None if types is None or types.everything else types
    framer = DecodedFramer(encoding, only, named, prefix)
    if seq > 0:
        await framer.prime(state.log, run_id, seq)
    return framer


def stream_reply(state: AppState, encoding: Encoding, follow: Follow) -> StreamResponse:
    """The open response around `follow(preamble, outlet)`: headers, heartbeats, send timeout."""
    settings = state.settings
    is_sse = encoding is Encoding.SSE
    outlet = Outlet()
    # The reconnect delay a browser's EventSource honours (TanStack ignores it).
    body = follow(sse.retry(settings.stream_retry_ms).encode() if is_sse else b"", outlet)
    options: dict[str, Any] = {} if is_sse else {"ping_message": blank_line}
    return StreamResponse(
        body,
        headers=STREAM_HEADERS,
        media_type=encoding.media_type,
        ping=settings.heartbeat_seconds,
        send_timeout=settings.stream_send_timeout_seconds,
        outlet=outlet,
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
    dependencies=[requires(READ_RUN)],
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
    types: Annotated[
        str | None,
        Query(
            description="comma-separated chunk types, `*` as a suffix wildcard "
            "(`TEXT_MESSAGE_*,TOOL_CALL_START`): only those; ids stay the events' seqs"
        ),
    ] = None,
    events: Annotated[
        Literal["named"] | None,
        Query(description="named: each SSE frame also carries `event: <chunk type>`"),
    ] = None,
    view: Annotated[
        Literal["decoded"] | None,
        Query(
            description='decoded: each frame is `{"seq", "chunk", "decoded"?}`, with the '
            "typewriter decoder's output after tool-call argument deltas (for arguments "
            'nested too deep to decode, the rest as sent, in pieces marked `"raw": true`)'
        ),
    ] = None,
    compact: Annotated[
        str | None,
        Query(description="`snapshot`: a valid AG-UI sequence from a snapshot at the offset (SSE)"),
    ] = None,
) -> Response:
    """Replay the run's events after the offset, then tail them live until the run closes."""
    if compact is not None:
        # Imported here: the AG-UI endpoint builds on this module's stream helpers.
        from agent_replay.api.ag_ui import agui_stream, compact_mode

        if compact_mode(compact):
            if types is not None or events is not None or view is not None:
                raise InvalidRequest(
                    "compact=snapshot cannot be combined with types, events or view"
                )
            if choose_encoding(request.headers.get("accept"), format) is not Encoding.SSE:
                raise InvalidRequest("compact=snapshot is served as SSE only")
            cursor = resolve_offset(request.headers.get("last-event-id"), offset)
            run = await state.log.get_run(run_id)
            return await agui_stream(state, run_id, run.thread_id, cursor, snapshot=True)
    return await stream_response(request, state, run_id, audience=True)
