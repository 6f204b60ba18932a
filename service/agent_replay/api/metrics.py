"""`GET /metrics`: the Prometheus scrape endpoint (see `agent_replay.metrics` for what it holds).

Admin keys only (agent_replay.api.auth.METRICS), unless `REPLAY_METRICS_PUBLIC=true` (a scraper
on a private network, or a proxy that keeps `/metrics` off the internet).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from agent_replay import metrics
from agent_replay.api.auth import METRICS, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.models import ERRORS

router = APIRouter(tags=["operations"], responses=ERRORS, route_class=GuardedRoute)


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
    dependencies=[requires(METRICS)],
)
async def scrape() -> Response:
    """This process's metrics in Prometheus text format (admin keys only, unless public)."""
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
