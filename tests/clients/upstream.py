"""AG-UI upstreams for the client tests: the demo agent over HTTP (paced, so a client can
join mid-run) and pydantic-ai's own AG-UI adapter (a third-party agent, not ours)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from service.agents.demo import demo_agent
from tests.agents.upstreams import pydantic_agent

DELAY = 0.02


async def demo(request: Request) -> Response:
    run_input = await request.json()

    async def body() -> AsyncIterator[bytes]:
        async for event in demo_agent(DELAY).source(run_input):
            yield f"data: {json.dumps(event)}\n\n".encode()

    return StreamingResponse(body(), media_type="text/event-stream")


def upstream_app() -> Starlette:
    return Starlette(
        routes=[
            Route("/demo", demo, methods=["POST"]),
            Route("/pydantic", pydantic_agent, methods=["POST"]),
        ]
    )
