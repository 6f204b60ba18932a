"""Where a hosted run's events come from: an AG-UI HTTP agent or a Python generator.

Every source yields `(chunk, text)`: the parsed event and, when the upstream
sent JSON text, that text, so the log stores the upstream's own bytes.
Failures are `UpstreamError`s with a message fit for the run's RUN_ERROR.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from service.agents.catalog import Agent, HttpAgent, RunInput
from service.agents.sse import ndjson_batches, sse_batches
from service.errors import InvalidJson
from service.log.chunks import dumps, loads

Event = tuple[dict[str, Any], str | None]


class UpstreamError(Exception):
    """The upstream failed; the message says how, for a person reading the run."""


def _event(text: str, number: int) -> Event:
    try:
        value = loads(text)
    except InvalidJson as exc:
        raise UpstreamError(f"upstream event {number} is not valid JSON: {exc.message}") from exc
    if not isinstance(value, dict) or not isinstance(value.get("type"), str) or not value["type"]:
        raise UpstreamError(f"upstream event {number} is not an AG-UI event (no string 'type')")
    return value, text if "\n" not in text and "\r" not in text else None


async def _http_events(
    client: aiohttp.ClientSession, agent: HttpAgent, run_input: RunInput, idle_seconds: float
) -> AsyncIterator[list[Event]]:
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
            reads = response.content.iter_any()
            ndjson = "ndjson" in media or "jsonl" in media
            number = 0
            async for texts in ndjson_batches(reads) if ndjson else sse_batches(reads):
                batch: list[Event] = []
                for text in texts:
                    number += 1
                    try:
                        batch.append(_event(text, number))
                    except UpstreamError:
                        if batch:
                            yield batch  # what came before the bad event is kept
                        raise
                yield batch
    except TimeoutError as exc:
        raise UpstreamError(f"upstream stalled: no event for {idle_seconds:g} s") from exc
    except aiohttp.ClientConnectorError as exc:
        raise UpstreamError(f"cannot connect to upstream {agent.url}: {exc}") from exc
    except aiohttp.ClientError as exc:
        raise UpstreamError(f"upstream connection failed: {exc!r}") from exc


async def _python_events(agent: Any, run_input: RunInput) -> AsyncIterator[list[Event]]:
    number = 0
    async for chunk in agent.source(run_input):
        number += 1
        if not isinstance(chunk, dict) or not isinstance(chunk.get("type"), str):
            raise UpstreamError(f"agent event {number} is not an AG-UI event (no string 'type')")
        yield [(chunk, None)]


def events(
    agent: Agent, run_input: RunInput, client: aiohttp.ClientSession, idle_seconds: float
) -> AsyncIterator[list[Event]]:
    """The upstream's events, a list per network read (a fast upstream's come together)."""
    if isinstance(agent, HttpAgent):
        return _http_events(client, agent, run_input, idle_seconds)
    return _python_events(agent, run_input)
