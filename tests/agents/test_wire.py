"""A hosted run's HTTP upstream read by its protocol (agent_replay.agents.wire), against
scripted HTTP servers on loopback: how the answer is framed, backpressure, and how
each way an answer goes wrong is worded."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from agent_replay.agents.catalog import HttpAgent
from agent_replay.agents.upstream import UpstreamError
from agent_replay.agents.wire import HttpUpstream
from agent_replay.ingest import Limits
from agent_replay.log import StoredChunk

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(script: Script) -> AsyncIterator[tuple[str, list[bytes]]]:
    """A server on a free loopback port running `script` per connection; yields its
    URL and the request heads it read."""
    heads: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        length = next(
            int(line.split(b":")[1]) for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )  # fmt: skip
        await reader.readexactly(length)
        try:
            await script(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/agent?x=1", heads
    finally:
        server.close()
        await server.wait_closed()


def sse(n: int) -> bytes:
    return b"data: " + json.dumps({"type": "CUSTOM", "n": n}).encode() + b"\n\n"


def ns(batches: list[list[StoredChunk]]) -> list[int]:
    return [json.loads(chunk.text)["n"] for batch in batches for chunk in batch]


async def read(
    url: str,
    *,
    headers: dict[str, str] | None = None,
    idle: float = 5.0,
    deliver: Callable[[list[StoredChunk]], bool] | None = None,
) -> list[list[StoredChunk]]:
    got: list[list[StoredChunk]] = []

    def keep(batch: list[StoredChunk]) -> bool:
        got.append(batch)
        return True

    agent = HttpAgent("scripted", url, headers or {})
    await HttpUpstream(agent, {"runId": "r"}, idle, Limits(), deliver or keep).run()
    return got


async def test_chunked_answer_when_events_split_across_chunks_then_each_delivered_once() -> None:
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Transfer-Encoding: chunked\r\n\r\n")
        body = b"".join(sse(n) for n in range(5))
        for at in range(0, len(body), 7):
            part = body[at : at + 7]
            writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            await writer.drain()
        writer.write(b"0\r\n\r\n")

    async with serving(script) as (url, heads):
        assert ns(await read(url)) == [0, 1, 2, 3, 4]
    head = heads[0].decode()
    assert head.startswith("POST /agent?x=1 HTTP/1.1\r\n")
    assert "Accept: text/event-stream" in head and "Connection: close" in head


async def test_answer_ended_by_closing_when_unframed_then_all_events_and_a_clean_end() -> None:
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n\r\n")
        writer.write(b'{"type":"CUSTOM","n":0}\n{"type":"CUSTOM","n":1}')  # no last newline

    async with serving(script) as (url, _):
        assert ns(await read(url)) == [0, 1]


async def test_answer_cut_when_framed_then_upstream_connection_failed_after_what_came() -> None:
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = sse(0)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
        writer.write(b"Content-Length: %d\r\n\r\n%s" % (len(body) + 100, body))

    got: list[list[StoredChunk]] = []

    def keep(batch: list[StoredChunk]) -> bool:
        got.append(batch)
        return True

    async with serving(script) as (url, _):
        with pytest.raises(UpstreamError, match="upstream connection failed: the answer ended"):
            await read(url, deliver=keep)
    assert ns(got) == [0]


@pytest.mark.parametrize("status", [302, 404, 500])
async def test_answer_not_2xx_then_its_status_and_body_start_are_the_error(status: int) -> None:
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        body = b"no such agent " * 50
        writer.write(
            b"HTTP/1.1 %d Nope\r\nContent-Length: %d\r\n\r\n%s" % (status, len(body), body)
        )

    async with serving(script) as (url, _):
        with pytest.raises(UpstreamError) as failed:
            await read(url)
    message = str(failed.value)
    assert message.startswith(f"upstream answered HTTP {status}: no such agent")
    assert len(message) < 400  # the body's start, not all of it


async def test_reading_when_deliver_says_no_room_then_paused_until_resume_and_not_stalled() -> None:
    first = asyncio.Event()
    written = asyncio.Event()

    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        writer.write(sse(0))
        await writer.drain()
        await first.wait()
        writer.write(sse(1))  # reaches the socket while the reader is paused
        await writer.drain()
        written.set()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        await reader.read()  # until the client gives up

    got: list[list[StoredChunk]] = []

    def full(batch: list[StoredChunk]) -> bool:
        got.append(batch)
        first.set()
        return len(got) > 1  # no room after the first read

    async with serving(script) as (url, _), serving(silent) as (silent_url, _):
        agent = HttpAgent("scripted", url, {})
        upstream = HttpUpstream(agent, {}, 0.2, Limits(), full)
        reading = asyncio.create_task(upstream.run())
        await first.wait()
        assert upstream.paused
        # Paused past the idle limit: an upstream silent since after the pause began,
        # read with the same limit, has been found stalled, so the paused reader's own
        # idle check (due no later, on the same clock) has run too. A held reader is no
        # stalled upstream, and what the upstream wrote meanwhile waits in the socket,
        # undelivered.
        control = HttpUpstream(HttpAgent("silent", silent_url, {}), {}, 0.2, Limits(), full)
        with pytest.raises(UpstreamError, match="upstream stalled"):
            await control.run()
        await written.wait()
        assert not reading.done()
        assert ns(got) == [0]
        upstream.resume()
        assert not upstream.paused
        await reading
    assert ns([got[0]]) == [0] and ns(got) == [0, 1]


async def test_upstream_silent_past_the_idle_limit_then_stalled() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        await reader.read()  # until the client gives up

    async with serving(script) as (url, _):
        with pytest.raises(UpstreamError, match=r"upstream stalled: no event for 0\.3 s"):
            await read(url, idle=0.3)


async def test_url_with_credentials_and_agent_headers_then_sent_with_the_request() -> None:
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")

    async with serving(script) as (url, heads):
        with_user = url.replace("http://", "http://ann:s%40cret@")
        assert await read(with_user, headers={"X-Key": "k1", "Accept": "*/*"}) == []
    head = heads[0].decode()
    assert f"Authorization: Basic {base64.b64encode(b'ann:s@cret').decode()}" in head
    assert "X-Key: k1" in head and "Accept: */*" in head


async def test_agent_header_when_named_in_another_case_then_replaces_ours_and_is_sent_once() -> (
    None
):
    async def script(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")

    async with serving(script) as (url, heads):
        await read(url, headers={"accept": "application/x-ndjson", "HOST": "spoofed"})
    lines = [line.lower() for line in heads[0].decode().split("\r\n")]
    assert [line for line in lines if line.startswith("accept:")] == [
        "accept: application/x-ndjson"
    ]
    assert [line for line in lines if line.startswith("host:")] == [f"host: {url.split('/')[2]}"]


@pytest.mark.parametrize(
    ("url", "headers", "says"),
    [
        ("http://127.0.0.1:9/agent", {}, "cannot connect to upstream http://127.0.0.1:9/agent"),
        ("ftp://127.0.0.1/agent", {}, "not an http(s) URL"),
        ("http://127.0.0.1:9/agent", {"X-A": "1\r\nX-B: 2"}, "a header with a line break"),
    ],
)
async def test_agent_when_unreachable_or_misconfigured_then_error_says_which(
    url: str, headers: dict[str, str], says: str
) -> None:
    with pytest.raises(UpstreamError) as failed:
        await read(url, headers=headers)
    assert says in str(failed.value)
