"""`POST /v1/agents/{agent}/ag-ui`: an AG-UI endpoint in front of hosted runs.

An AG-UI client (`@ag-ui/client`'s `HttpAgent`, CopilotKit) posts a
`RunAgentInput` and reads AG-UI events, as from any agent. A `runId` the
service does not know starts a hosted run with it; a known one joins that
run. Either way the run belongs to the service: closing the client does not
stop it.

    new run                      the log from its first event (without the
                                 service's `CUSTOM run.accepted`)
    join                         the same, from the run's first event
    join ?compact=snapshot       the run so far as a snapshot prefix, then live
    Last-Event-ID: N             the run as of N as a snapshot prefix, then live

A prefix is `RUN_STARTED`, `MESSAGES_SNAPSHOT` (the run's input conversation
and everything streamed up to the offset), `STATE_SNAPSHOT` where there is
state, and a start event for each message, tool call, reasoning span or step
still open (`agent_replay.projector.agui`): valid for a client that remembers
nothing. `GET /v1/runs/{id}/stream?compact=snapshot` serves the same.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request
from starlette.responses import Response

from agent_replay.api.agents import BudgetHeader, OnDisconnectHeader, RunAgentInput
from agent_replay.api.auth import AG_UI, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import AppState, StateDep
from agent_replay.api.forwarding import forwarded_headers
from agent_replay.api.models import ERRORS
from agent_replay.api.reencoded import events_after, events_upto, sse_frames, sse_response
from agent_replay.api.responses import refuse_erased
from agent_replay.audit.cache import thread_runs
from agent_replay.errors import InvalidRequest, RunConflict
from agent_replay.log.chunks import loads
from agent_replay.projector.agui import AguiProjection, AguiRelay, AguiResume
from agent_replay.stream import Offset, Plan, plan_stream, resolve_offset
from agent_replay.stream.outlet import Outlet

router = APIRouter(tags=["agents"], responses=ERRORS, route_class=GuardedRoute)

Compact = Annotated[
    str | None,
    Query(
        description="`snapshot`: begin with a snapshot of the run so far instead of replaying it"
    ),
]


def compact_mode(value: str | None) -> bool:
    if value in (None, "", "none"):
        return False
    if value == "snapshot":
        return True
    raise InvalidRequest(f"compact={value!r}: expected snapshot")


async def _run_input(state: AppState, run_id: str, thread_id: str | None) -> Any:
    """The run's recorded RunAgentInput (its conversation before the run), if any."""
    if thread_id is None:
        return None
    for run in await thread_runs(state.log, thread_id):
        if run.run_id == run_id and run.input:
            return loads(run.input)
    return None


async def agui_stream(
    state: AppState, run_id: str, thread_id: str | None, offset: Offset, *, snapshot: bool
) -> Response:
    """The run as AG-UI events after `offset`; a snapshot prefix when it starts mid-run."""
    plan = await plan_stream(state.hub, run_id, offset)  # 404 / 409 before any byte
    resume = None
    if snapshot or plan.cursor > 0:
        resume = AguiResume(AguiProjection.for_input(await _run_input(state, run_id, thread_id)))
    outlet = Outlet()
    return sse_response(_body(state, plan, resume, outlet), state, {}, outlet)


async def _body(
    state: AppState, plan: Plan, resume: AguiResume | None, outlet: Outlet
) -> AsyncIterator[bytes]:
    feed = AguiRelay().feed if resume is None else resume.feed
    if resume is not None:
        async for event in events_upto(state, plan.run_id, plan.cursor):
            resume.skip(event)
        prefix = resume.begin()
        if prefix:
            yield sse_frames(prefix, plan.cursor or None).encode()
    if plan.exhausted:
        return
    async for blob in events_after(state, plan, feed, outlet):
        yield blob


@router.post(
    "/v1/agents/{agent}/ag-ui",
    responses={200: {"description": "AG-UI events (SSE)", "content": {"text/event-stream": {}}}},
    dependencies=[requires(AG_UI)],
)
async def ag_ui(
    request: Request,
    state: StateDep,
    agent: Annotated[str, Path(description="an agent name from GET /v1/agents")],
    body: Annotated[RunAgentInput, Body()],
    compact: Compact = None,
    last_event_id: Annotated[str | None, Header()] = None,
    x_on_disconnect: OnDisconnectHeader = None,
    x_budget: BudgetHeader = None,
) -> Response:
    """Run an agent as an AG-UI endpoint: start the run (or join it), stream its events.

    A start sends the request headers the agent's `forward_headers` names on to its
    upstream, never stored (431 `forwarded_headers_too_large`, 400 `forwarded_credential`).
    """
    snapshot = compact_mode(compact)
    known = await state.log.find_run(body.runId) if body.runId else None
    if known is None:
        if last_event_id is not None:
            if body.runId:
                await refuse_erased(state.log, run_id=body.runId)  # 410, not a wrong request
            raise InvalidRequest("Last-Event-ID resumes a run: send the runId it belongs to")
        run, started = await state.drivers.start(
            agent,
            body.model_dump(exclude_none=True),
            on_disconnect=x_on_disconnect,
            budget_header=x_budget,
            forwarded=forwarded_headers(request, agent),
        )
        if started:
            return await agui_stream(state, run.run_id, run.thread_id, 0, snapshot=False)
        known = run  # started by someone else in between: a join like any other
    elif known.agent is not None and known.agent != agent:
        # Not naming its agent: the caller may not be allowed to read the run.
        raise RunConflict(f"run {known.run_id!r} is not a run of agent {agent!r}")
    offset: Offset = resolve_offset(last_event_id, None)
    if last_event_id is None and snapshot:
        offset = "now"
    return await agui_stream(state, known.run_id, known.thread_id, offset, snapshot=snapshot)
