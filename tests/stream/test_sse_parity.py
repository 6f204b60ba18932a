"""`StreamResponse` against the pinned sse-starlette's `EventSourceResponse`, on its public API.

The service streams with its own small ASGI response (see agent_replay.api.sse for
why); where the two meet, a client must not tell them apart: the same start
message and headers, the same bytes, the same end, HEAD answered alike, the
same heartbeat shape, and the client's disconnect ending both.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
import sse_starlette
from sse_starlette import EventSourceResponse
from starlette.types import Message

from agent_replay.api.sse import StreamResponse

PINNED = "3.7.0"
EVENTS = [b"retry: 1000\n\nid: 1\ndata: {}\n\n", b'id: 2\ndata: {"a":1}\n\nid: 3\ndata: []\n\n']
HEADERS = {"Cache-Control": "no-cache", "X-Custom": "1"}


def scope(method: str = "GET") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/", "headers": []}


async def body(gate: asyncio.Event | None = None) -> AsyncIterator[bytes]:
    for event in EVENTS:
        yield event
        if gate is not None:
            await gate.wait()


async def run(
    response: Any, method: str = "GET", disconnect: asyncio.Event | None = None
) -> list[Message]:
    sent: list[Message] = []

    async def receive() -> Message:
        await (disconnect or asyncio.Event()).wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    async with asyncio.timeout(30):  # a guard against a hang, not a timing assertion
        await response(scope(method), receive, send)
    return sent


Make = Callable[..., Any]


def ours(content: AsyncIterator[bytes], **options: Any) -> StreamResponse:
    return StreamResponse(content, headers=HEADERS, **options)


def theirs(content: AsyncIterator[bytes], **options: Any) -> EventSourceResponse:
    return EventSourceResponse(content, headers=HEADERS, sep="\n", **options)


def test_sse_starlette_when_imported_then_the_pinned_version() -> None:
    assert sse_starlette.__version__ == PINNED


@pytest.mark.parametrize("method", ["GET", "HEAD"])
async def test_response_when_body_ends_then_same_messages_as_sse_starlette(method: str) -> None:
    mine = await run(ours(body(), ping=60), method)
    reference = await run(theirs(body(), ping=60), method)
    assert mine == reference
    assert mine[0]["status"] == 200 and mine[-1] == {
        "type": "http.response.body", "body": b"", "more_body": False}  # fmt: skip
    headers = dict(mine[0]["headers"])
    assert headers[b"cache-control"] == b"no-cache" and headers[b"x-accel-buffering"] == b"no"


async def test_response_when_idle_then_heartbeat_has_sse_starlettes_shape() -> None:
    beats = []
    for make in (ours, theirs):
        gate = asyncio.Event()
        sent: list[Message] = []

        async def receive() -> Message:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        async def send(
            message: Message, sent: list[Message] = sent, gate: asyncio.Event = gate
        ) -> None:
            sent.append(message)
            if message.get("body", b"").startswith(b":"):
                gate.set()

        async with asyncio.timeout(30):
            await make(body(gate), ping=0.02)(scope(), receive, send)
        beat = next(m["body"] for m in sent if m.get("body", b"").startswith(b":"))
        beats.append(re.sub(rb"ping - .*\n", b"ping - <time>\n", beat))
    assert beats[0] == beats[1] == b": ping - <time>\n\n"


async def test_response_when_client_disconnects_then_both_end_and_close_the_body() -> None:
    for make in (ours, theirs):
        closed = asyncio.Event()
        disconnect = asyncio.Event()

        async def endless(
            closed: asyncio.Event = closed, disconnect: asyncio.Event = disconnect
        ) -> AsyncIterator[bytes]:
            try:
                yield EVENTS[0]
                disconnect.set()
                await asyncio.Event().wait()
                yield b""
            finally:
                closed.set()

        sent = await run(make(endless(), ping=60), disconnect=disconnect)
        assert [m.get("body") for m in sent[1:]] == [EVENTS[0]]
        assert closed.is_set(), make.__name__
