"""`GET /v1/threads/{thread_id}/stream`: every run of a thread, each announced as soon as it
is made, and their events as they come (SSE, NDJSON).

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
from agent_replay.api.stream import audience_options, stream_reply, thread_framer_at
from agent_replay.stream import choose_encoding
from agent_replay.stream.thread import ThreadFramer, follow_thread, plan_thread, resolve_cursor
from agent_replay.stream.threadcursor import MAX_RUNS

router = APIRouter(
    prefix="/v1/threads", tags=["stream"], responses=ERRORS, route_class=GuardedRoute
)


@router.get(
    "/{thread_id}/stream",
    responses={
        200: {
            "description": "Every run of the thread in order (by creation: `created_at`, "
            "then run id), each announced as soon as it is made, before its events (SSE "
            '`event: run`, `data: {"run_id": ...}`; NDJSON `{"id": ..., "run": {"run_id": '
            "...}}`), then the events of every announced run as they come, runs "
            "interleaved, each run's in order, as the run stream sends them but with ids "
            "that are thread cursors: `<run_id>:<seq>` of the frame's own run, then "
            "`~<run_id>:<seq>` for each other run still followed (one run followed: just "
            f"`<run_id>:<seq>`). At most {MAX_RUNS} unfinished runs are followed at once; "
            "a later run is announced once one of them is closed and delivered. Runs made "
            "later follow on the open stream, which stays open (heartbeats while idle)",
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
            f"thread cursor already delivered (`<run_id>:<seq>` entries joined by `~`, at "
            f"most {MAX_RUNS}); Last-Event-ID wins"
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
    """Follow a thread: its runs in order, each announced as it is made, their events as
    they come."""
    cursor = resolve_cursor(request.headers.get("last-event-id"), offset)
    encoding = choose_encoding(request.headers.get("accept"), format)
    options = audience_options(request)
    plan = await plan_thread(state.hub, thread_id, cursor)

    async def framer_for(run_id: str, seq: int) -> ThreadFramer:
        return await thread_framer_at(state, run_id, seq, encoding, options)

    return stream_reply(
        state,
        encoding,
        lambda preamble, outlet: follow_thread(
            state.hub, plan, framer_for, encoding, preamble=preamble, outlet=outlet
        ),
    )
