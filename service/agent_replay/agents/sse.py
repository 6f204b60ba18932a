"""Reading an upstream agent's event stream: SSE (AG-UI's default) or NDJSON.

Works on the raw bytes, a network read at a time (`SseParser`, `NdjsonParser`:
plain objects fed each read, so a caller reading the socket needs no async
generator in between), and gives each read's complete events as a list: a fast
upstream's events are then parsed and appended in batches rather than one async
step each. Each event is its JSON text exactly as the upstream sent it, so the
log keeps the upstream's bytes.
"""

from __future__ import annotations


def _sse_block(block: bytes) -> str | None:
    """The data of one SSE event (several `data:` lines joined by \\n), if any."""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        # Comments (":"), `event:`, `id:` and `retry:` carry no chunk.
    return b"\n".join(data).decode() if data else None


def _sse_event(block: bytes) -> str | None:
    """`_sse_block`, with the common block (one `data:` line) read without a loop."""
    if block.startswith(b"data:") and b"\n" not in block:
        return (block[6:] if block.startswith(b"data: ") else block[5:]).decode()
    return _sse_block(block)


class SseParser:
    """Complete SSE events out of raw reads: `feed(read)` each read, `end()` once."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, read: bytes) -> list[str]:
        buffer = self._buffer + read if self._buffer else read
        if b"\r" in buffer:
            # CRLF and bare CR line ends; a CR at the very end may be half a CRLF.
            keep = buffer.endswith(b"\r")
            body = buffer[:-1] if keep else buffer
            buffer = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if keep else b"")
        *blocks, self._buffer = buffer.split(b"\n\n")
        return [text for text in map(_sse_event, blocks) if text is not None]

    def end(self) -> list[str]:
        # The SSE specification drops an event not ended by a blank line; an agent
        # that closes right after its last `data:` line still meant it.
        last = _sse_block(self._buffer.rstrip(b"\r\n"))
        self._buffer = b""
        return [] if last is None else [last]


class NdjsonParser:
    """Complete NDJSON lines out of raw reads: `feed(read)` each read, `end()` once."""

    __slots__ = ("_buffer",)

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, read: bytes) -> list[str]:
        *lines, self._buffer = (self._buffer + read).split(b"\n")
        return [text for line in lines if (text := line.strip().decode())]

    def end(self) -> list[str]:
        last, self._buffer = self._buffer.strip(), b""
        return [last.decode()] if last else []


Parser = SseParser | NdjsonParser
