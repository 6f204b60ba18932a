"""`StreamResponse`: the untimed data send still ends a stalled stream (send_timeout)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from sse_starlette.sse import SendTimeoutError
from starlette.types import Message

from agent_replay.api.sse import StreamResponse

SCOPE = {"type": "http", "method": "GET", "path": "/", "headers": []}


async def _receive() -> Message:
    await asyncio.Event().wait()  # the client never disconnects
    raise AssertionError("unreachable")


async def test_send_when_client_stalls_then_response_ends_with_send_timeout() -> None:
    sent: list[Message] = []
    closed = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        try:
            yield b"id: 1\ndata: {}\n\n"
            yield b"id: 2\ndata: {}\n\n"  # this send never completes
            yield b"id: 3\ndata: {}\n\n"
        finally:
            closed.set()

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body", b"").startswith(b"id: 2"):
            await asyncio.Event().wait()  # a client that stopped reading

    response = StreamResponse(body(), ping=0.05, send_timeout=0.2)
    with pytest.raises(SendTimeoutError):
        # A guard against a hang, not a timing assertion.
        async with asyncio.timeout(30):
            await response(SCOPE, _receive, send)
    assert closed.is_set()
    bodies = [m.get("body", b"") for m in sent if m["type"] == "http.response.body"]
    assert b"id: 3" not in b"".join(bodies)


async def test_send_when_client_reads_then_pings_and_data_both_arrive() -> None:
    sent: list[Message] = []
    release = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield b"id: 1\ndata: {}\n\n"
        await release.wait()
        yield b"id: 2\ndata: {}\n\n"

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body", b"").startswith(b":"):
            release.set()  # the first ping lets the body finish

    response = StreamResponse(body(), ping=0.02, send_timeout=5)
    async with asyncio.timeout(30):
        await response(SCOPE, _receive, send)
    bodies = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert bodies.startswith(b"id: 1\ndata: {}\n\n:")
    assert bodies.endswith(b"id: 2\ndata: {}\n\n")
    assert sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}
