"""Requests written on the socket by hand: a body declared and never sent, or sent chunked
without end, which no HTTP client library lets a test send on purpose."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# Long enough for a loaded machine; a server that waits for the body never answers.
ANSWER_SECONDS = 10.0


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error_code(self) -> str:
        error: dict[str, Any] = json.loads(self.body)["error"]
        assert error["message"], error
        code: str = error["code"]
        return code


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    status_line = await reader.readline()
    assert status_line.startswith(b"HTTP/1.1 "), status_line
    status = int(status_line.split()[1])
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Answer(status, headers, body)


def _head(method: str, path: str, host: str, headers: dict[str, str]) -> bytes:
    lines = [
        f"{method} {path} HTTP/1.1",
        f"Host: {host}",
        *(f"{k}: {v}" for k, v in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def declared_not_sent(
    base_url: str, method: str, path: str, declared: int, headers: dict[str, str]
) -> Answer:
    """Headers declaring a `declared`-byte body, then a few bytes of it and nothing more:
    an answer comes back only if the server answers without reading the body."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    try:
        head = _head(method, path, url.netloc, {**headers, "Content-Length": str(declared)})
        writer.write(head + b'{"a": "')
        await writer.drain()
        return await asyncio.wait_for(_read_answer(reader), ANSWER_SECONDS)
    finally:
        writer.close()


async def chunked_until_answered(
    base_url: str, method: str, path: str, headers: dict[str, str], prefix: bytes, most: int
) -> tuple[Answer, int]:
    """A chunked body, `prefix` then filler, sent until the server answers (at most `most`
    bytes, then the end); returns the answer and how many body bytes were sent."""
    url = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(url.hostname, url.port)
    sent = 0

    async def send() -> None:
        nonlocal sent
        writer.write(_head(method, path, url.netloc, {**headers, "Transfer-Encoding": "chunked"}))
        chunk = prefix
        while sent < most:
            writer.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            await writer.drain()  # waits while the server reads no more
            sent += len(chunk)
            chunk = b"a" * 16384
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    sender = asyncio.ensure_future(send())
    try:
        answer = await asyncio.wait_for(_read_answer(reader), ANSWER_SECONDS)
        return answer, sent
    finally:
        sender.cancel()
        await asyncio.gather(sender, return_exceptions=True)
        writer.close()
