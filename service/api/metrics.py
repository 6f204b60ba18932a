"""`GET /metrics`: the Prometheus scrape endpoint (see `service.metrics` for what it holds).

Admin keys only (service.api.auth.METRICS), unless `REPLAY_METRICS_PUBLIC=true` (a scraper
on a private network, or a proxy that keeps `/metrics` off the internet).
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.responses import Response

from service import metrics
from service.api.auth import METRICS, requires
from service.api.bodies import GuardedRoute
from service.api.models import ERRORS

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
