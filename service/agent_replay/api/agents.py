"""Hosted runs over HTTP: list agents, start a run, cancel a run."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from agent_replay.api.auth import CANCEL_RUN, LIST_AGENTS, START_RUN, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import DriversDep
from agent_replay.api.forwarding import forwarded_headers
from agent_replay.api.models import ERRORS, RunOut
from agent_replay.api.responses import JSON
from agent_replay.log.store import RUN_ID

RUN_ID_PATTERN = f"^{RUN_ID.pattern}$"

router = APIRouter(tags=["agents"], responses=ERRORS, route_class=GuardedRoute)


class RunAgentInput(BaseModel):
    """AG-UI's RunAgentInput, camelCase as on the wire; other fields pass through."""

    model_config = ConfigDict(extra="allow")
    threadId: str | None = None
    # Checked by the driver (422 invalid_run_id, as everywhere), documented here.
    runId: str | None = Field(default=None, json_schema_extra={"pattern": RUN_ID_PATTERN})
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    context: list[dict[str, Any]] = Field(default_factory=list)
    state: Any = Field(default_factory=dict)
    forwardedProps: Any = Field(default_factory=dict)
    # Not sent to the agent: the run's disconnect policy (agent_replay.agents.policy).
    onDisconnect: Any = Field(
        default=None,
        description='continue, cancel or cancel_after: {"policy": "cancel_after", '
        '"grace_seconds": 30} or "cancel_after=30"; default: the agent\'s',
    )
    # Not sent to the agent either: the run's budget (agent_replay.agents.budget).
    budget: Any = Field(
        default=None,
        description='ceilings that end the run budget_exhausted: {"max_seconds": 30, '
        '"max_events": 500, "max_tool_calls": 10, "max_output_tokens": 4000} (any of them) '
        'or "max_seconds=30,max_events=500"; only tightens the agent\'s',
    )
    # Not sent to the agent either: redaction rules the run adds to its agent's and the
    # service's (agent_replay.ingest.rules).
    redact: Any = Field(
        default=None,
        description='redaction rules this run adds: detector names, "default" or '
        '"name=regex" (422 invalid_redaction if one is malformed; nothing starts)',
    )


# Every route that starts a hosted run takes it; the body's `onDisconnect` is the same.
OnDisconnectHeader = Annotated[
    str | None,
    Header(
        alias="X-On-Disconnect",
        description="the run's disconnect policy: continue, cancel or cancel_after=SECONDS",
    ),
]


# Every route that starts a hosted run takes it too; the body's `budget` is the same.
BudgetHeader = Annotated[
    str | None,
    Header(
        alias="X-Budget",
        description="the run's budget, tightening its agent's: comma-separated NAME=NUMBER "
        "of max_seconds, max_events, max_tool_calls, max_output_tokens",
    ),
]


class StartedOut(BaseModel):
    run_id: str
    thread_id: str


@router.get("/v1/agents", dependencies=[requires(LIST_AGENTS)])
async def list_agents(drivers: DriversDep) -> Response:
    """The agents this service can drive (the built-in `demo` is always there)."""
    agents = [
        {"name": name, "kind": agent.kind} for name, agent in sorted(drivers.catalog.agents.items())
    ]
    return JSON({"agents": agents})


@router.post(
    "/v1/agents/{agent}/runs",
    status_code=201,
    responses={201: {"model": StartedOut}},
    dependencies=[requires(START_RUN)],
)
async def start_run(
    request: Request,
    drivers: DriversDep,
    agent: Annotated[str, Path(description="an agent name from GET /v1/agents")],
    body: Annotated[RunAgentInput, Body()],
    x_on_disconnect: OnDisconnectHeader = None,
    x_budget: BudgetHeader = None,
) -> Response:
    """Start a hosted run; answers at once. Follow it at `/v1/runs/{run_id}/stream`.

    The run belongs to the service, not to this request: it goes on whoever
    listens, until the agent finishes, fails, or `POST /v1/runs/{id}/cancel`.
    The request headers the agent's `forward_headers` names are sent on to its
    upstream, never stored (431 `forwarded_headers_too_large`, 400 `forwarded_credential`).
    """
    run, started = await drivers.start(
        agent,
        body.model_dump(exclude_none=True),
        on_disconnect=x_on_disconnect,
        budget_header=x_budget,
        forwarded=forwarded_headers(request, agent),
    )
    return JSON(
        {"run_id": run.run_id, "thread_id": run.thread_id, "started": started},
        status_code=201 if started else 200,
    )


@router.post(
    "/v1/runs/{run_id}/cancel",
    responses={200: {"model": RunOut}},
    dependencies=[requires(CANCEL_RUN)],
)
async def cancel_run(drivers: DriversDep, run_id: str) -> Response:
    """Stop a run: appends RUN_ERROR "cancelled" and closes it. A closed run is left as is."""
    run = await drivers.cancel(run_id)
    return JSON(run.to_json())
