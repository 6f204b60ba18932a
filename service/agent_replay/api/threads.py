"""`GET /v1/threads/{thread_id}/stream`: every run of a thread, announced then tailed (SSE, NDJSON).

The following is `agent_replay.stream.thread`'s; this route resolves the cursor
and the audience's options, and frames each run's events with ids that name the run.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Path, Query, Request
from starlette.responses import Response

from agent_replay.api.auth import READ_THREAD, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import StateDep
from agent_replay.api.models import ERRORS
from agent_replay.api.stream import audience_framer_at, audience_options, stream_reply
from agent_replay.stream import choose_encoding
from agent_replay.stream.framing import Framer
from agent_replay.stream.thread import follow_thread, plan_thread, resolve_cursor

router = APIRouter(
    prefix="/v1/threads", tags=["stream"], responses=ERRORS, route_class=GuardedRoute
)


@router.get(
    "/{thread_id}/stream",
    responses={
        200: {
            "description": "Every run of the thread in order (by creation: `created_at`, "
            "then run id), each announced before its events (SSE `event: run`, "
            '`id: <run_id>:0`, `data: {"run_id": ...}`; NDJSON `{"id": "<run_id>:0", '
            '"run": {"run_id": ...}}`), then its events as the run stream sends them but '
            "with ids `<run_id>:<seq>`; runs made later follow on the open stream, which "
            "stays open (heartbeats while idle)",
            "content": {"text/event-stream": {}, "application/x-ndjson": {}},
        },
    },
    dependencies=[requires(READ_THREAD)],
)
async def stream_thread(
    request: Request,
    state: StateDep,
    thread_id: Annotated[str, Path(description="the thread's id")],
    offset: Annotated[
        str | None,
        Query(
            description="-1 (from the thread's first run), now (only what comes next), or a "
            "cursor `<run_id>:<seq>` already delivered; Last-Event-ID wins"
        ),
    ] = None,
    format: Annotated[str | None, Query(description="sse or ndjson; overrides Accept")] = None,
    types: Annotated[
        str | None,
        Query(
            description="comma-separated chunk types, `*` as a suffix wildcard: only those "
            "(announcements are always sent)"
        ),
    ] = None,
    events: Annotated[
        Literal["named"] | None,
        Query(description="named: each event's SSE frame also carries `event: <chunk type>`"),
    ] = None,
    view: Annotated[
        Literal["decoded"] | None,
        Query(description="decoded: each event as the run stream's `view=decoded` frames it"),
    ] = None,
) -> Response:
    """Follow a thread: its runs one after the other, then each new run as it is made."""
    cursor = resolve_cursor(request.headers.get("last-event-id"), offset)
    encoding = choose_encoding(request.headers.get("accept"), format)
    options = audience_options(request)
    plan = await plan_thread(state.hub, thread_id, cursor)

    async def framer_for(run_id: str, seq: int) -> Framer:
        # The ids: `format_cursor(run_id, seq)`.
        return await audience_framer_at(state, run_id, seq, encoding, options, f"{run_id}:")

    return stream_reply(
        state,
        encoding,
        lambda preamble, outlet: follow_thread(
            state.hub, plan, framer_for, encoding, preamble=preamble, outlet=outlet
        ),
    )
