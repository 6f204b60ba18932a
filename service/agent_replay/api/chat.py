"""`/v1/chat/{agent}`: what TanStack AI's ChatClient needs, on one URL.

    POST                       start a run (X-Run-Id names it) and answer with its stream
    POST + Last-Event-ID       resume that run's stream; never start anything
    GET ?offset=-1&runId=R     joinRun(R): the run from its first event, then live
    GET ?threadId=T            hydration: {messages, activeRun, interrupts, page}

`?format=ndjson` (or an NDJSON Accept) gives `fetchHttpStream`'s framing.

Diverges from the plain stream endpoint on purpose: TanStack's client treats
any non-2xx as fatal and never retries it, and a 204 or empty body as a broken
stream, so here an unknown run or offset is a 200 carrying one id-less
RUN_ERROR (as TanStack's own server answers), and a finished run the client
already has is a 200 with an empty body rather than 204.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request
from starlette.responses import Response

from agent_replay.api.agents import (
    RUN_ID_PATTERN,
    BudgetHeader,
    OnDisconnectHeader,
    RunAgentInput,
)
from agent_replay.api.auth import CHAT, reads_hosted_runs_only, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import StateDep
from agent_replay.api.forwarding import forwarded_headers
from agent_replay.api.hydration import hydrate
from agent_replay.api.models import ERRORS
from agent_replay.api.responses import refuse_erased
from agent_replay.api.sse import STREAM_HEADERS
from agent_replay.api.stream import stream_response
from agent_replay.errors import InvalidRequest, OffsetOutOfRange, RunNotFound
from agent_replay.log import check_run_id
from agent_replay.log.chunks import dumps
from agent_replay.stream import Encoding, choose_encoding, sse

router = APIRouter(
    prefix="/v1/chat",
    tags=["chat (TanStack AI)"],
    responses=ERRORS,
    dependencies=[requires(CHAT)],
    route_class=GuardedRoute,
)

AgentName = Annotated[str, Path(description="an agent name from GET /v1/agents")]


def _unresumable(request: Request, message: str) -> Response:
    """One id-less RUN_ERROR, 200: the client reports it instead of failing hard."""
    encoding = choose_encoding(request.headers.get("accept"), request.query_params.get("format"))
    chunk = dumps(
        {"type": "RUN_ERROR", "message": message, "code": "not_resumable",
         "timestamp": int(time.time() * 1000)}
    )  # fmt: skip
    body = sse.json_frame(chunk) if encoding is Encoding.SSE else f"{chunk}\n"
    return Response(body, media_type=encoding.media_type, headers=STREAM_HEADERS)


async def _stream(request: Request, state: Any, run_id: str, offset: str | None = None) -> Response:
    try:
        response = await stream_response(request, state, run_id, offset=offset)
    except RunNotFound:
        await refuse_erased(state.log, run_id=run_id)  # an erased run is 410, not resumable
        return _unresumable(request, f"no run with id {run_id!r}")
    except OffsetOutOfRange as exc:
        return _unresumable(request, exc.message)
    if response.status_code == 204:
        encoding = choose_encoding(
            request.headers.get("accept"), request.query_params.get("format")
        )
        return Response(b"", media_type=encoding.media_type, headers=STREAM_HEADERS)
    return response


@router.post(
    "/{agent}",
    responses={200: {"content": {"text/event-stream": {}, "application/x-ndjson": {}}}},
)
async def chat_post(
    request: Request,
    state: StateDep,
    agent: AgentName,
    body: Annotated[RunAgentInput, Body()],
    x_run_id: Annotated[str | None, Header(json_schema_extra={"pattern": RUN_ID_PATTERN})] = None,
    last_event_id: Annotated[str | None, Header()] = None,
    x_on_disconnect: OnDisconnectHeader = None,
    x_budget: BudgetHeader = None,
) -> Response:
    """Start a run and stream it; with `Last-Event-ID`, resume the run's stream instead.

    A start sends the request headers the agent's `forward_headers` names on to its
    upstream, never stored (431 `forwarded_headers_too_large`, 400 `forwarded_credential`).
    """
    if x_run_id is not None:
        check_run_id(x_run_id)  # 422 invalid_run_id, as a bad id anywhere else
    run_id = x_run_id or body.runId
    if last_event_id is not None:
        if not run_id:
            raise InvalidRequest("a resume needs the run: send X-Run-Id (or runId in the body)")
        return await _stream(request, state, run_id, offset=last_event_id)
    run, _ = await state.drivers.start(
        agent,
        body.model_dump(exclude_none=True),
        run_id=run_id,
        on_disconnect=x_on_disconnect,
        budget_header=x_budget,
        forwarded=forwarded_headers(request, agent),
    )
    # From the start, whether we started it or it already existed (a retried POST):
    # the client de-duplicates by id.
    return await _stream(request, state, run.run_id, offset="-1")


@router.get(
    "/{agent}",
    responses={
        200: {
            "description": "a run's stream (`runId`) or the thread hydration document (`threadId`)",
            "content": {
                "text/event-stream": {},
                "application/x-ndjson": {},
                "application/json": {},
            },
        }
    },
)
async def chat_get(
    request: Request,
    state: StateDep,
    agent: AgentName,
    run_id: Annotated[str | None, Query(alias="runId")] = None,
    thread_id: Annotated[str | None, Query(alias="threadId")] = None,
    offset: Annotated[str | None, Query(description="-1 to join from the start")] = None,
    limit: Annotated[int | None, Query(ge=1, le=1000)] = None,
    before: Annotated[str | None, Query()] = None,
) -> Response:
    """`?runId=` joins a run (Last-Event-ID wins over `offset`); `?threadId=` hydrates a thread."""
    if run_id is not None:
        return await _stream(request, state, run_id)
    if thread_id is not None:
        return await hydrate(
            state, agent, thread_id, limit=limit, before=before,
            hosted_only=reads_hosted_runs_only(request),
        )  # fmt: skip
    raise InvalidRequest("name a run (?runId=&offset=-1) or a thread (?threadId=)")
