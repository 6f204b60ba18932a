"""Reading an upstream agent's event stream: SSE (AG-UI's default) or NDJSON.

Works on the raw bytes, a network read at a time, and yields each read's
complete events as a list: a fast upstream's events are then parsed, queued
and appended in batches rather than one async step each. Each event is its
JSON text exactly as the upstream sent it, so the log keeps the upstream's bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator


def _sse_block(block: bytes) -> str | None:
    """The data of one SSE event (several `data:` lines joined by \\n), if any."""
    data: list[bytes] = []
    for line in block.split(b"\n"):
        if line.startswith(b"data:"):
            value = line[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        # Comments (":"), `event:`, `id:` and `retry:` carry no chunk.
    return b"\n".join(data).decode() if data else None


async def sse_batches(reads: AsyncIterator[bytes]) -> AsyncIterator[list[str]]:
    buffer = b""
    async for read in reads:
        buffer += read
        if b"\r" in buffer:
            # CRLF and bare CR line ends; a CR at the very end may be half a CRLF.
            keep = buffer.endswith(b"\r")
            body = buffer[:-1] if keep else buffer
            buffer = body.replace(b"\r\n", b"\n").replace(b"\r", b"\n") + (b"\r" if keep else b"")
        *blocks, buffer = buffer.split(b"\n\n")
        events = [text for text in map(_sse_block, blocks) if text is not None]
        if events:
            yield events
    # The SSE specification drops an event not ended by a blank line; an agent
    # that closes right after its last `data:` line still meant it.
    last = _sse_block(buffer.rstrip(b"\r\n"))
    if last is not None:
        yield [last]


async def ndjson_batches(reads: AsyncIterator[bytes]) -> AsyncIterator[list[str]]:
    buffer = b""
    async for read in reads:
        buffer += read
        *lines, buffer = buffer.split(b"\n")
        events = [text for line in lines if (text := line.strip().decode())]
        if events:
            yield events
    if buffer.strip():
        yield [buffer.strip().decode()]
