"""Hosted agents of `"protocol": "ai-sdk"` whose upstream misbehaves: each failure ends the
run with a RUN_ERROR saying what went wrong, what came before it kept; an upstream that
goes on after its `finish` has its run end there. (The well-behaved upstream, the real `ai`
package, is tests/clients/test_ai_sdk_upstream.py.)"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.agents.conftest import follow
from tests.conftest import settings_for
from tests.support.servers import Running, serve_asgi, serve_in_process

OPENING: list[Any] = [
    {"type": "start", "messageId": "upstream-message"},
    {"type": "text-start", "id": "t"},
    {"type": "text-delta", "id": "t", "delta": "partial "},
]
SCRIPTS: dict[str, list[Any]] = {
    "not-a-chunk": [*OPENING, {"type": "text-delta", "delta": "no id"}],
    "invalid-json": [*OPENING, "{nope"],
    "no-finish": OPENING,
    "after-finish": [
        *OPENING,
        {"type": "text-end", "id": "t"},
        {"type": "finish"},
        {"type": "text-start", "id": "late"},
        "[DONE]",
    ],
}


def scripted(name: str) -> Any:
    async def answer(request: Request) -> Response:
        request.app.state.bodies.append(await request.json())

        async def frames() -> AsyncIterator[bytes]:
            for chunk in SCRIPTS[name]:
                text = chunk if isinstance(chunk, str) else json.dumps(chunk)
                yield f"data: {text}\n\n".encode()

        headers = {"x-vercel-ai-ui-message-stream": "v1"}
        return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)

    return answer


async def data_stream(request: Request) -> Response:
    """What an AI SDK 4 route answered: `toDataStreamResponse()`."""
    body = 'f:{"messageId":"m"}\n0:"Hello"\ne:{"finishReason":"stop"}\n'
    headers = {"x-vercel-ai-data-stream": "v1"}
    return Response(body, media_type="text/plain; charset=utf-8", headers=headers)


@pytest.fixture(scope="module")
async def ai_sdk_hosted(database_url: str) -> AsyncIterator[tuple[Running, Starlette]]:
    routes = [Route(f"/{n}", scripted(n), methods=["POST"]) for n in SCRIPTS]
    app = Starlette(routes=[*routes, Route("/data-stream", data_stream, methods=["POST"])])
    app.state.bodies = []
    async with serve_asgi(app) as base:
        agents = {
            n: {"url": f"{base}/{n}", "protocol": "ai-sdk"} for n in [*SCRIPTS, "data-stream"]
        }
        settings = settings_for(database_url, agents=json.dumps(agents), heartbeat_seconds=0.5)
        async with serve_in_process(settings) as running:
            yield running, app


async def run_of(service: Running, agent: str) -> tuple[str, list[dict[str, Any]]]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
        answer = await http.post(
            f"/v1/agents/{agent}/runs",
            json={"threadId": f"t-{agent}",
                  "messages": [{"id": "u1", "role": "user", "content": "Hi"}]},
        )  # fmt: skip
        assert answer.status_code == 201, answer.text
        run_id: str = answer.json()["run_id"]
        return run_id, await follow(http, run_id)


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("not-a-chunk", "upstream event 4 is not a UI message stream chunk: event 3 "
                        "(text-delta) needs a non-empty string 'id'"),
        ("invalid-json", "upstream event 4 is not valid JSON"),
        ("no-finish", "ended without a terminal event"),
    ],
)  # fmt: skip
async def test_ai_sdk_upstream_when_it_fails_then_run_error_says_why_and_earlier_kept(
    ai_sdk_hosted: tuple[Running, Starlette], agent: str, says: str
) -> None:
    service, _ = ai_sdk_hosted
    run_id, events = await run_of(service, agent)
    last = events[-1]
    assert last["type"] == "RUN_ERROR" and says in last["message"], last
    assert [e["type"] for e in events[:-1]] == [
        "CUSTOM", "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
    ]  # fmt: skip
    assert events[1] == {"type": "RUN_STARTED", "threadId": f"t-{agent}", "runId": run_id}


async def test_ai_sdk_4_data_stream_upstream_when_hosted_then_run_error_names_the_protocol(
    ai_sdk_hosted: tuple[Running, Starlette],
) -> None:
    service, _ = ai_sdk_hosted
    _, events = await run_of(service, "data-stream")
    assert [e["type"] for e in events] == ["CUSTOM", "RUN_ERROR"]
    assert "the AI SDK 4 data stream protocol" in events[-1]["message"]
    assert "toUIMessageStreamResponse" in events[-1]["message"]


async def test_ai_sdk_upstream_when_it_goes_on_after_finish_then_the_run_ends_at_finish(
    ai_sdk_hosted: tuple[Running, Starlette],
) -> None:
    service, app = ai_sdk_hosted
    run_id, events = await run_of(service, "after-finish")
    assert [e["type"] for e in events] == [
        "CUSTOM", "RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END", "RUN_FINISHED",
    ]  # fmt: skip
    async with httpx.AsyncClient(base_url=service.base_url) as http:
        assert (await http.get(f"/v1/runs/{run_id}")).json()["status"] == "finished"
    # Started with AG-UI's RunAgentInput: posted as useChat would have posted that chat.
    body = next(b for b in app.state.bodies if b["id"] == "t-after-finish")
    assert body == {"id": "t-after-finish", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}]}  # fmt: skip
