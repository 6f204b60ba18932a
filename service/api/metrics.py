"""`GET /metrics`: the Prometheus scrape endpoint (see `service.metrics` for what it holds).

Behind the API keys like `/v1`, unless `REPLAY_METRICS_PUBLIC=true` (a scraper
on a private network, or a proxy that keeps `/metrics` off the internet).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from service import metrics
from service.api.deps import require_api_key, state_of

router = APIRouter(tags=["operations"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format"}},
)
async def scrape(request: Request) -> Response:
    """This process's metrics in Prometheus text format."""
    if not state_of(request).settings.metrics_public:
        await require_api_key(request)
    return Response(metrics.exposition(), media_type=metrics.CONTENT_TYPE)
