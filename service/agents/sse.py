"""Reading an upstream agent's event stream: SSE (AG-UI's default) or NDJSON.

Yields each event's JSON text exactly as the upstream sent it, so the log
keeps the upstream's bytes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator


async def sse_data(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The `data` of each SSE event (multi-line data joined by \\n)."""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    # The SSE specification drops an event not ended by a blank line; an agent
    # that closes right after its last `data:` line still meant it.
    if data:
        yield "\n".join(data)


async def ndjson_lines(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    async for raw in lines:
        line = raw.strip()
        if line:
            yield line
