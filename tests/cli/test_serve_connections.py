"""`agent-replay serve` against slow and idle clients, over raw sockets: a client that sends a
request's head slowly (or nothing), stops mid-body, or sits idle is cut off within the
configured bounds, and one past the connection cap is refused; a stream that writes
nothing for longer than all of them stays open.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx
import pytest

from tests.support.servers import serve_subprocess

# Small in the test, so a cut comes fast; the bound each wait allows is far above it.
TIMEOUT = 0.5
WITHIN = 10.0

Connect = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def _env(database_url: str, **more: str) -> dict[str, str]:
    return {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_HEADER_TIMEOUT_SECONDS": str(TIMEOUT),
        "REPLAY_BODY_TIMEOUT_SECONDS": str(TIMEOUT),
        "REPLAY_KEEP_ALIVE_SECONDS": str(TIMEOUT),
        # No heartbeat while the idle stream is watched: it must be silent.
        "REPLAY_HEARTBEAT_SECONDS": "600",
        **more,
    }


@pytest.fixture(scope="module")
def base(database_url: str) -> Iterator[str]:
    with serve_subprocess(_env(database_url)) as (url, _):
        yield url


@pytest.fixture
async def connect(base: str) -> AsyncIterator[Connect]:
    host, port = base.removeprefix("http://").split(":")
    opened: list[asyncio.StreamWriter] = []

    async def open_one() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection(host, int(port))
        opened.append(writer)
        return reader, writer

    yield open_one
    for writer in opened:
        writer.close()


async def _closed_within(reader: asyncio.StreamReader) -> tuple[bytes, float]:
    """Everything the server sends until it closes (bounded by WITHIN), and when it closed."""
    started = time.monotonic()
    answer = await asyncio.wait_for(reader.read(), WITHIN)
    return answer, time.monotonic() - started


async def test_connection_when_it_sends_nothing_then_closed_after_the_header_timeout(
    connect: Connect,
) -> None:
    reader, _ = await connect()
    answer, took = await _closed_within(reader)
    assert answer == b"" and took < WITHIN


@pytest.mark.parametrize(
    "sent", [b"GET /v1/ru", b"GET /v1/runs HTTP/1.1\r\nHost: localhost\r\nX-A: 1"]
)
async def test_connection_when_head_left_partial_then_closed_after_the_header_timeout(
    connect: Connect, sent: bytes
) -> None:
    reader, writer = await connect()
    writer.write(sent)
    answer, _ = await _closed_within(reader)
    assert answer == b""


async def test_connection_when_head_sent_a_byte_at_a_time_then_closed_before_it_is_whole(
    connect: Connect,
) -> None:
    reader, writer = await connect()
    head = b"GET /v1/runs HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    read = asyncio.ensure_future(reader.read())
    sent = 0
    # Each byte well within the timeout of the one before: only a bound on the whole
    # head stops this.
    while not read.done() and sent < len(head):
        writer.write(head[sent : sent + 1])
        sent += 1
        await asyncio.wait([read], timeout=TIMEOUT / 5)
    assert read.done() and read.result() == b"", f"still open after {sent} bytes"
    assert sent < len(head)


async def test_request_when_body_stalls_then_408_request_timeout_and_closed(
    connect: Connect,
) -> None:
    reader, writer = await connect()
    writer.write(
        b"POST /v1/runs/slow-body/events HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
        b'{"events": ['
    )
    answer, _ = await _closed_within(reader)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), answer
    assert json.loads(body)["error"]["code"] == "request_timeout"


async def test_keep_alive_connection_when_idle_then_closed_after_its_timeout(
    connect: Connect,
) -> None:
    reader, writer = await connect()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    answer, _ = await _closed_within(reader)
    assert answer.startswith(b"HTTP/1.1 200 ")


async def test_stream_when_silent_longer_than_every_timeout_then_stays_open_and_delivers(
    base: str, connect: Connect
) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}
        r = await http.post("/v1/runs/quiet-stream/events", json={"events": [event]})
        assert r.status_code in (200, 201), r.text
        async with http.stream("GET", "/v1/runs/quiet-stream/stream") as stream:
            chunks = stream.aiter_bytes()
            first = await anext(chunks)
            assert b"TEXT_MESSAGE_CONTENT" in first
            # Nothing is written while connections opened after the stream's, each held
            # by one of the timeouts (header, body, keep-alive), are cut by theirs, three
            # times over: every timeout the stream's connection could be under has run
            # out several times meanwhile...
            silent = asyncio.ensure_future(anext(chunks))
            for _ in range(3):
                idle, stalled, kept = [await connect() for _ in range(3)]
                stalled[1].write(
                    b"POST /v1/runs/quiet-body/events HTTP/1.1\r\nHost: localhost\r\n"
                    b"Content-Type: application/json\r\nContent-Length: 10\r\n\r\n{"
                )
                kept[1].write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
                cut = [(await _closed_within(reader))[0] for reader, _ in (idle, stalled, kept)]
                assert cut[0] == b"" and cut[1].startswith(b"HTTP/1.1 408 ")
                assert cut[2].startswith(b"HTTP/1.1 200 ")
            assert not silent.done(), silent.result()
            # ...and the stream is still open: the next event comes through it.
            r = await http.post("/v1/runs/quiet-stream/events", json={"events": [event]})
            assert r.status_code in (200, 201), r.text
            assert b"TEXT_MESSAGE_CONTENT" in await asyncio.wait_for(silent, WITHIN)


async def test_connection_when_past_the_cap_then_503_too_many_connections(
    database_url: str,
) -> None:
    env = _env(database_url, REPLAY_MAX_CONNECTIONS="2", REPLAY_HEADER_TIMEOUT_SECONDS="60")
    with serve_subprocess(env) as (url, _):
        host, port = url.removeprefix("http://").split(":")
        held = [await asyncio.open_connection(host, int(port)) for _ in range(2)]
        try:
            async with httpx.AsyncClient(base_url=url, timeout=WITHIN) as http:
                r = await http.get("/healthz")
            assert r.status_code == 503
            assert r.json()["error"]["code"] == "too_many_connections"
            for _, writer in held:
                writer.close()
            # Once they are gone, requests are served again.
            async with httpx.AsyncClient(base_url=url, timeout=WITHIN) as http:
                deadline = time.monotonic() + WITHIN
                while (await http.get("/healthz")).status_code != 200:
                    assert time.monotonic() < deadline
        finally:
            for _, writer in held:
                writer.close()
