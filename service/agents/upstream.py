"""Where a hosted run's events come from: an AG-UI HTTP agent or a Python generator.

Every source yields lists of `StoredChunk`s, validated by ingest like any
append (so `max_chunk_bytes` applies); when the upstream sent JSON text, that
text is what the log stores. Failures are `UpstreamError`s with a message fit
for the run's RUN_ERROR; what came before a bad event is yielded first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from service.agents.catalog import Agent, HttpAgent, RunInput
from service.agents.sse import NdjsonParser, Parser, SseParser
from service.errors import InvalidEvent, InvalidInput, InvalidJson, PayloadTooLarge
from service.ingest import Limits, chunk_from_text, chunk_from_value
from service.log.chunks import StoredChunk, dumps


class UpstreamError(Exception):
    """The upstream failed; the message says how, for a person reading the run."""


def _refused(
    exc: InvalidInput, number: int, limits: Limits, source: str = "upstream"
) -> UpstreamError:
    """Ingest's refusal of event `number`, worded for the run's RUN_ERROR."""
    event = f"{source} event {number}"
    if isinstance(exc, InvalidJson):
        return UpstreamError(f"{event} is not valid JSON: {exc.message}")
    if isinstance(exc, PayloadTooLarge):
        return UpstreamError(f"{event} is over {limits.max_chunk_bytes} bytes")
    if isinstance(exc, InvalidEvent):
        return UpstreamError(f"{event} is not an AG-UI event (no string 'type')")
    return UpstreamError(f"{event} was refused: {exc.message}")


async def _http_events(
    client: aiohttp.ClientSession,
    agent: HttpAgent,
    run_input: RunInput,
    idle_seconds: float,
    limits: Limits,
) -> AsyncIterator[list[StoredChunk]]:
    # aiohttp, not httpx, for the upstream stream: its C HTTP parser reads a
    # fast agent's events at several times the rate of httpx's pure-Python one.
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10.0, sock_read=idle_seconds)
    headers = {"Accept": "text/event-stream", **agent.headers}
    try:
        async with client.post(
            agent.url, data=dumps(run_input).encode(), headers={
                "Content-Type": "application/json", **headers}, timeout=timeout,
        ) as response:  # fmt: skip
            if response.status >= 400:
                body = (await response.content.read(300)).decode(errors="replace")
                detail = body or response.reason or ""
                raise UpstreamError(f"upstream answered HTTP {response.status}: {detail}")
            media = response.headers.get("content-type", "").split(";")[0].strip().lower()
            parser: Parser = (
                NdjsonParser() if "ndjson" in media or "jsonl" in media else SseParser()
            )
            # The socket read straight into the parser: a streamed token costs one
            # resumption of this generator, not of a stack of async iterators.
            content = response.content
            number = 0
            while True:
                read = await content.readany()
                texts = parser.feed(read) if read else parser.end()
                if texts:
                    batch: list[StoredChunk] = []
                    for text in texts:
                        number += 1
                        try:
                            batch.append(chunk_from_text(text, number - 1, limits))
                        except InvalidInput as exc:
                            if batch:
                                yield batch  # what came before the bad event is kept
                            raise _refused(exc, number, limits) from exc
                    yield batch
                if not read:
                    return
    except TimeoutError as exc:
        raise UpstreamError(f"upstream stalled: no event for {idle_seconds:g} s") from exc
    except aiohttp.ClientConnectorError as exc:
        raise UpstreamError(f"cannot connect to upstream {agent.url}: {exc}") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"upstream connection failed: {exc!r}") from exc


async def _python_events(
    agent: Any, run_input: RunInput, limits: Limits
) -> AsyncIterator[list[StoredChunk]]:
    number = 0
    async for value in agent.source(run_input):
        number += 1
        try:
            chunk = chunk_from_value(value, number - 1, limits)
        except InvalidInput as exc:
            raise _refused(exc, number, limits, source="agent") from exc
        yield [chunk]


def events(
    agent: Agent,
    run_input: RunInput,
    client: aiohttp.ClientSession,
    idle_seconds: float,
    limits: Limits,
) -> AsyncIterator[list[StoredChunk]]:
    """The upstream's events, a list per network read (a fast upstream's come together)."""
    if isinstance(agent, HttpAgent):
        return _http_events(client, agent, run_input, idle_seconds, limits)
    return _python_events(agent, run_input, limits)
