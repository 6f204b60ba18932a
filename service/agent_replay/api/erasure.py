"""`DELETE /v1/threads/{thread_id}`: erase a thread's runs, leaving a tombstone each.

The erasing is the log's (`agent_replay.log.erasure`); this route names who asked
(`caller_id`: the key's id) and answers the tombstones.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from agent_replay.api.auth import ADMIN, caller_id, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import LogDep
from agent_replay.api.models import ERRORS
from agent_replay.api.responses import JSON

router = APIRouter(tags=["audit"], responses=ERRORS, route_class=GuardedRoute)

# A reason is a note for the record, not a document.
MAX_REASON = 1000


class TombstoneOut(BaseModel):
    run_id: str
    thread_id: str | None
    events: int = Field(description="how many events the run held when it was erased")
    head: str = Field(description="the run's chain head then (hex; see the erasure page)")
    erased_at: str
    erased_by: str = Field(description="the erasing key's id (`key:…`), `open`, or `cli:<user>`")
    reason: str | None


class ErasedOut(BaseModel):
    thread_id: str
    runs: list[TombstoneOut]


@router.delete(
    "/v1/threads/{thread_id}",
    responses={200: {"model": ErasedOut}},
    dependencies=[requires(ADMIN)],
)
async def erase_thread(
    request: Request,
    log: LogDep,
    thread_id: Annotated[str, Path(description="the thread's id")],
    reason: Annotated[
        str | None, Query(max_length=MAX_REASON, description="why, kept in each tombstone")
    ] = None,
) -> Response:
    """Erase every run of the thread: its events and all that is stored of it are
    deleted in one transaction, a tombstone per run is what remains. Erasing it again
    changes nothing and answers the same tombstones."""
    tombstones = await log.erase_thread(thread_id, erased_by=caller_id(request), reason=reason)
    return JSON({"thread_id": thread_id, "runs": [t.to_json() for t in tombstones]})
