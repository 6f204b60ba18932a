"""The thread hydration document TanStack's ChatClient reads on attach."""

from __future__ import annotations

from starlette.responses import Response

from service.api.deps import AppState
from service.api.responses import JSON


async def hydrate(
    state: AppState, agent: str, thread_id: str, *, limit: int | None, before: str | None
) -> Response:
    # Placeholder until thread transcripts land (service.audit): an unknown or
    # empty thread hydrates to nothing, which is what the client expects.
    return JSON({"messages": [], "activeRun": None, "interrupts": None})
