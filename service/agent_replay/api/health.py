"""Liveness and readiness."""

from __future__ import annotations

import os

from fastapi import APIRouter
from starlette.responses import Response

from agent_replay import migrate
from agent_replay.api.deps import StateDep
from agent_replay.api.responses import JSON, error_response
from agent_replay.errors import ReplayError

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz() -> Response:
    """The process is up; `pid` names which one (of `agent-replay serve --workers N`) answered."""
    return JSON({"status": "ok", "pid": os.getpid()})


@router.get("/readyz")
async def readyz(state: StateDep) -> Response:
    """The database answers and its schema is at the newest migration; 503 `draining` from
    SIGTERM on (agent_replay.api.drain), so no new work is sent to a process about to stop."""
    if state.drivers.draining:
        return error_response(503, "draining", "draining before it stops: send work elsewhere")
    try:
        current = await state.log.schema_version()
    except ReplayError as exc:
        return error_response(503, "unavailable", exc.message)
    head = migrate.head_revision()
    if current != head:
        return error_response(
            503,
            "migrations_pending",
            f"schema at {current}, code expects {head}: run agent-replay migrate",
        )
    return JSON({"status": "ready", "schema": current})
