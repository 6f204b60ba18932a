"""`POST /v1/tokens`: a signed token for one thread or one run, for a browser to hold.

An app's backend (holding an admin key) mints a token per chat and hands it
to the page; the page reads its own thread (and, with `chat`, starts and
cancels runs on it) and nothing else. A token expires; a client that gets
401 `token_expired` fetches a fresh one and resumes with `Last-Event-ID`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field, model_validator
from starlette.responses import Response

from agent_replay.access import TokenScope
from agent_replay.access.tokens import DEFAULT_TTL_SECONDS, MAX_TTL_SECONDS
from agent_replay.api.auth import ADMIN, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import StateDep
from agent_replay.api.models import ERRORS
from agent_replay.api.responses import JSON

router = APIRouter(tags=["access"], responses=ERRORS, route_class=GuardedRoute)


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    thread_id: str | None = Field(default=None, min_length=1, max_length=1024)
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")
    scopes: list[TokenScope] = Field(
        default_factory=lambda: [TokenScope.READ],
        description='["read"], or ["read", "chat"] to also start, join and cancel runs '
        "on the thread through /v1/chat/{agent}",
    )
    ttl_seconds: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TTL_SECONDS,
        description=f"seconds; default REPLAY_TOKEN_TTL_SECONDS ({DEFAULT_TTL_SECONDS})",
    )

    @model_validator(mode="after")
    def _one_target(self) -> TokenIn:
        if (self.thread_id is None) == (self.run_id is None):
            raise ValueError("name exactly one of thread_id and run_id")
        if TokenScope.READ not in self.scopes:
            raise ValueError('scopes must include "read"')
        return self


class TokenOut(BaseModel):
    token: str
    expires_at: str = Field(description="ISO 8601, UTC")
    scopes: list[TokenScope]
    thread_id: str | None = None
    run_id: str | None = None


@router.post(
    "/v1/tokens",
    status_code=201,
    responses={201: {"model": TokenOut}},
    dependencies=[requires(ADMIN)],
)
async def create_token(state: StateDep, body: Annotated[TokenIn, Body()]) -> Response:
    """A token bound to one thread or run (admin keys only)."""
    signer = await state.gate.signer()
    scopes = sorted(set(body.scopes))
    ttl = body.ttl_seconds or state.settings.token_ttl_seconds
    token, expires = signer.mint(
        thread_id=body.thread_id, run_id=body.run_id, scopes=scopes, ttl_seconds=ttl
    )
    out: dict[str, object] = {
        "token": token,
        "expires_at": datetime.fromtimestamp(expires, UTC).isoformat(),
        "scopes": [s.value for s in scopes],
    }
    out["thread_id" if body.thread_id is not None else "run_id"] = body.thread_id or body.run_id
    return JSON(out, status_code=201)
