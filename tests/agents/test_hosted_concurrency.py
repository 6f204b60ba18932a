"""Many hosted runs at once on one process: each gets its own upstream connection.

A model streams for tens of seconds, so a process hosts hundreds of runs at
the same time; none may wait for another run's upstream to finish before its
own upstream is even asked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.agents.conftest import follow
from tests.conftest import settings_for
from tests.support.servers import serve_asgi, serve_in_process

# More than aiohttp's default connection pool (100), the cap this guards against.
RUNS = 130


def _held_upstream(arrived: set[str], everyone: asyncio.Event, release: asyncio.Event) -> Starlette:
    """Answers each run at once with RUN_STARTED, ends it only once `release` is set."""

    async def agent(request: Request) -> StreamingResponse:
        body = await request.json()
        ids = {"runId": body["runId"], "threadId": body["threadId"]}

        async def events() -> AsyncIterator[bytes]:
            yield f"data: {json.dumps({'type': 'RUN_STARTED', **ids})}\n\n".encode()
            arrived.add(body["runId"])
            if len(arrived) == RUNS:
                everyone.set()
            await release.wait()
            yield f"data: {json.dumps({'type': 'RUN_FINISHED', **ids})}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agent", agent, methods=["POST"])])


async def test_hosted_runs_when_more_than_a_hundred_at_once_then_every_upstream_is_read(
    database_url: str,
) -> None:
    arrived: set[str] = set()
    everyone, release = asyncio.Event(), asyncio.Event()
    async with serve_asgi(_held_upstream(arrived, everyone, release)) as upstream:
        settings = settings_for(database_url, agents=json.dumps({"held": f"{upstream}/agent"}))
        async with (
            serve_in_process(settings) as running,
            httpx.AsyncClient(base_url=running.base_url, timeout=30) as http,
        ):
            run_ids = [f"many-{i}" for i in range(RUNS)]
            for run_id in run_ids:
                r = await http.post("/v1/agents/held/runs", json={"runId": run_id})
                assert r.status_code == 201, r.text
            try:
                await asyncio.wait_for(everyone.wait(), 30)
            except TimeoutError:
                waiting = RUNS - len(arrived)
                raise AssertionError(f"{waiting} runs' upstreams were never asked") from None
            finally:
                release.set()
            for run_id in run_ids[-3:]:
                events = await follow(http, run_id)
                assert [e["type"] for e in events] == ["CUSTOM", "RUN_STARTED", "RUN_FINISHED"]
