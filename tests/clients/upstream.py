"""AG-UI upstreams for the client tests: the demo agent over HTTP (paced, so a client can
join mid-run) and pydantic-ai's own AG-UI adapter (a third-party agent, not ours).

A run whose id is in `held` pauses before its second message until `POST /release/{run_id}`
(a joiner announcing it is attached), so "joined mid-run" holds however slow the machine
is; a bound keeps a harness that never releases from hanging the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from agent_replay.agents.demo import demo_agent
from tests.agents.upstreams import pydantic_agent

DELAY = 0.02
HOLD_BOUND_SECONDS = 60.0


def upstream_app(held: frozenset[str] = frozenset()) -> Starlette:
    releases: dict[str, asyncio.Event] = {}

    def release_of(run_id: str) -> asyncio.Event:
        return releases.setdefault(run_id, asyncio.Event())

    async def demo(request: Request) -> Response:
        run_input = await request.json()
        run_id = run_input.get("runId")
        hold = release_of(run_id) if run_id in held else None

        async def body() -> AsyncIterator[bytes]:
            messages = 0
            async for event in demo_agent(DELAY).source(run_input):
                if event["type"] == "TEXT_MESSAGE_START":
                    messages += 1
                    if messages == 2 and hold is not None:
                        with contextlib.suppress(TimeoutError):
                            await asyncio.wait_for(hold.wait(), HOLD_BOUND_SECONDS)
                yield f"data: {json.dumps(event)}\n\n".encode()

        return StreamingResponse(body(), media_type="text/event-stream")

    async def release(request: Request) -> Response:
        release_of(request.path_params["run_id"]).set()
        return Response(status_code=204)

    return Starlette(
        routes=[
            Route("/demo", demo, methods=["POST"]),
            Route("/pydantic", pydantic_agent, methods=["POST"]),
            Route("/release/{run_id}", release, methods=["POST"]),
        ]
    )
