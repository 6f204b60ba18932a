"""Upstream AG-UI agents for the tests, served on loopback: a real one and misbehaving ones.

`/pydantic` is pydantic-ai's own AG-UI adapter around its `TestModel` (no
network; it really calls the agent's tool). The others are scripted: each
misbehaves in one way a real upstream does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

weather = Agent(TestModel(), name="weather")


@weather.tool_plain
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"snow in {city}"


async def pydantic_agent(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=weather)


def sse(event: dict[str, Any] | str) -> bytes:
    text = event if isinstance(event, str) else json.dumps(event)
    return f"data: {text}\n\n".encode()


async def _ids(request: Request) -> tuple[str, str]:
    body = await request.json()
    return body["runId"], body["threadId"]


def _opening(run_id: str, thread_id: str) -> list[bytes]:
    return [
        sse({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id}),
        sse({"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}),
        sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "partial "}),
    ]


def _streaming(body: AsyncIterator[bytes]) -> StreamingResponse:
    return StreamingResponse(body, media_type="text/event-stream")


async def drops(request: Request) -> Response:
    run_id, thread_id = await _ids(request)

    async def body() -> AsyncIterator[bytes]:
        for part in _opening(run_id, thread_id):
            yield part
        raise ConnectionResetError("upstream went away")  # uvicorn cuts the connection

    return _streaming(body())


async def invalid_json(request: Request) -> Response:
    run_id, thread_id = await _ids(request)

    async def body() -> AsyncIterator[bytes]:
        for part in _opening(run_id, thread_id):
            yield part
        yield sse('{"type": "TEXT_MESSAGE_CONTENT", "delta": ')

    return _streaming(body())


async def no_terminal(request: Request) -> Response:
    run_id, thread_id = await _ids(request)

    async def body() -> AsyncIterator[bytes]:
        for part in _opening(run_id, thread_id):
            yield part

    return _streaming(body())


async def _tracked(
    request: Request, name: str, after_opening: Callable[[], AsyncIterator[bytes]]
) -> Response:
    """Opens a run, then streams `after_opening`; records in app.state.<name>
    when it started and when its client went away (the finally runs on abort)."""
    run_id, thread_id = await _ids(request)
    state: dict[str, Any] = getattr(request.app.state, name)
    state["started"].set()

    async def body() -> AsyncIterator[bytes]:
        try:
            for part in _opening(run_id, thread_id):
                yield part
            async for part in after_opening():
                yield part
        finally:
            state["aborted"].set()

    return _streaming(body())


async def stalls(request: Request) -> Response:
    """Sends its opening, then never another byte."""

    async def nothing() -> AsyncIterator[bytes]:
        await asyncio.Event().wait()
        yield b""

    return await _tracked(request, "stalls", nothing)


async def slow(request: Request) -> Response:
    """Keeps streaming a delta every 20 ms until its client goes away."""

    async def deltas() -> AsyncIterator[bytes]:
        for i in range(10_000):
            await asyncio.sleep(0.02)
            yield sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": f"{i} "})

    return await _tracked(request, "slow", deltas)


async def too_deep(request: Request) -> Response:
    """Its fourth event nests 1,000 levels (the service's bound is MAX_EVENT_DEPTH)."""
    run_id, thread_id = await _ids(request)

    async def body() -> AsyncIterator[bytes]:
        for part in _opening(run_id, thread_id):
            yield part
        yield sse('{"type": "CUSTOM", "name": "deep", "value": ' + "[" * 999 + "]" * 999 + "}")
        yield sse({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})

    return _streaming(body())


async def oversized(request: Request) -> Response:
    """Its fourth event is over the service's default max_chunk_bytes (1 MiB)."""
    run_id, thread_id = await _ids(request)

    async def body() -> AsyncIterator[bytes]:
        for part in _opening(run_id, thread_id):
            yield part
        yield sse({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "x" * (1 << 20)})
        yield sse({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})

    return _streaming(body())


async def http_error(request: Request) -> Response:
    return JSONResponse({"detail": "model overloaded"}, status_code=503)


def upstream_app() -> Starlette:
    app = Starlette(
        routes=[
            Route("/pydantic", pydantic_agent, methods=["POST"]),
            Route("/drops", drops, methods=["POST"]),
            Route("/invalid-json", invalid_json, methods=["POST"]),
            Route("/no-terminal", no_terminal, methods=["POST"]),
            Route("/stalls", stalls, methods=["POST"]),
            Route("/slow", slow, methods=["POST"]),
            Route("/http-error", http_error, methods=["POST"]),
            Route("/oversized", oversized, methods=["POST"]),
            Route("/too-deep", too_deep, methods=["POST"]),
        ]
    )
    app.state.slow = {"started": asyncio.Event(), "aborted": asyncio.Event()}
    app.state.stalls = {"started": asyncio.Event(), "aborted": asyncio.Event()}
    return app


class Scripted:
    """An agent that goes on until its client stops it: what budgets are for.

    Its run's `forwardedProps.script` picks what it streams, one step every
    `forwardedProps.pace` seconds (0.01 by default), for up to `steps` steps
    (10,000 by default) and then finishes:

        text    a text message, a delta of `word ` (5 characters) a step
        tools   a tool call a step (start, arguments, end, result)
        usage   a step's text message (`hi`), then STEP_FINISHED reporting
                `{"completionTokens": 25}`

    Per run id it records that it started and whether its client went away
    before it finished (an abort, as the upstream saw it).
    """

    def __init__(self) -> None:
        self.started: dict[str, asyncio.Event] = {}
        self.aborted: dict[str, asyncio.Event] = {}
        self.finished: set[str] = set()
        self.inputs: dict[str, dict[str, Any]] = {}  # the RunAgentInput each run sent

    def event(self, table: dict[str, asyncio.Event], run_id: str) -> asyncio.Event:
        return table.setdefault(run_id, asyncio.Event())

    async def endpoint(self, request: Request) -> Response:
        body = await request.json()
        run_id, thread_id = body["runId"], body["threadId"]
        self.inputs[run_id] = body
        props = body.get("forwardedProps") or {}
        script = _SCRIPTS[props.get("script", "text")]
        pace = float(props.get("pace", 0.01))
        steps = int(props.get("steps", 10_000))
        self.event(self.started, run_id).set()

        async def stream() -> AsyncIterator[bytes]:
            done = False
            try:
                yield sse({"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id})
                for step in range(steps):
                    for event in script(step):
                        yield sse(event)
                    await asyncio.sleep(pace)
                yield sse({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})
                done = True
                self.finished.add(run_id)
            finally:
                if not done:
                    self.event(self.aborted, run_id).set()

        return _streaming(stream())


def _text_step(step: int) -> list[dict[str, Any]]:
    delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}
    if step == 0:
        return [{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}, delta]
    return [delta]


def _tools_step(step: int) -> list[dict[str, Any]]:
    call = f"call-{step}"
    return [
        {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "lookup"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"q": 1}'},
        {"type": "TOOL_CALL_END", "toolCallId": call},
        {"type": "TOOL_CALL_RESULT", "toolCallId": call, "messageId": f"r-{step}",
         "content": "found"},
    ]  # fmt: skip


def _usage_step(step: int) -> list[dict[str, Any]]:
    message = f"m-{step}"
    return [
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": "hi"},
        {"type": "TEXT_MESSAGE_END", "messageId": message},
        {"type": "STEP_FINISHED", "stepName": f"step-{step}",
         "usage": {"completionTokens": 25}},
    ]  # fmt: skip


_SCRIPTS: dict[str, Callable[[int], list[dict[str, Any]]]] = {
    "text": _text_step,
    "tools": _tools_step,
    "usage": _usage_step,
}
