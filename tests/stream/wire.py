"""Test-side readers of the stream's wire formats, strict about framing."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class SseReader:
    """Feeds raw bytes; keeps only complete events (a cut connection loses the partial one)."""

    events: list[tuple[int, str]] = field(default_factory=list)
    comments: int = 0
    retry: list[int] = field(default_factory=list)
    skipped_to: int | None = None
    _buffer: bytes = b""

    def feed(self, data: bytes) -> list[tuple[int, str]]:
        self._buffer += data
        *blocks, self._buffer = self._buffer.split(b"\n\n")
        new: list[tuple[int, str]] = []
        for block in blocks:
            lines = block.decode().split("\n")
            if all(line.startswith(":") for line in lines):
                self.comments += 1
                continue
            if len(lines) == 1 and lines[0].startswith("retry: "):
                self.retry.append(int(lines[0][7:]))
                continue
            comments = [line for line in lines if line.startswith(":")]
            self.comments += len(comments)
            lines = [line for line in lines if not line.startswith(":")]
            if len(lines) == 1 and lines[0].startswith("id: "):
                # A filtered stream moving the id past what it skipped: no event.
                self.skipped_to = int(lines[0][4:])
                continue
            assert len(lines) == 2, f"an event is exactly id + data lines: {block!r}"
            assert lines[0].startswith("id: ") and lines[1].startswith("data: "), block
            new.append((int(lines[0][4:]), lines[1][6:]))
        self.events.extend(new)
        return new

    @property
    def last_id(self) -> int | None:
        """What a client would send as Last-Event-ID: its last event, or a later id-only frame."""
        last = self.events[-1][0] if self.events else None
        if self.skipped_to is not None and (last is None or self.skipped_to > last):
            return self.skipped_to
        return last


@dataclass
class NdjsonReader:
    events: list[tuple[int, str]] = field(default_factory=list)
    blank_lines: int = 0
    _buffer: bytes = b""

    def feed(self, data: bytes) -> list[tuple[int, str]]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        new: list[tuple[int, str]] = []
        for line in lines:
            if not line.strip():
                self.blank_lines += 1
                continue
            value: dict[str, Any] = json.loads(line)
            assert set(value) == {"id", "chunk"} and isinstance(value["id"], str), line
            new.append((int(value["id"]), json.dumps(value["chunk"], separators=(",", ":"))))
        self.events.extend(new)
        return new


async def open_slow_reader(
    base_url: str, path: str
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A raw HTTP/1.1 GET of `path` on a socket with a 4 KB receive window (a client
    that reads slowly, or not at all until told to)."""
    url = urlsplit(base_url)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny window
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (url.hostname, url.port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=1 << 16)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


def dechunk(body: bytes) -> bytes:
    """HTTP/1.1 chunked transfer coding, undone."""
    out = bytearray()
    at = 0
    while True:
        end = body.index(b"\r\n", at)
        size = int(body[at:end].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[end + 2 : end + 2 + size]
        at = end + 2 + size + 2
