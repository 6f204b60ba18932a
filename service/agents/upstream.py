"""Where a hosted run's events come from: an AG-UI HTTP agent or a Python generator.

Every source yields `(chunk, text)`: the parsed event and, when the upstream
sent JSON text, that text, so the log stores the upstream's own bytes.
Failures are `UpstreamError`s with a message fit for the run's RUN_ERROR.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx

from service.agents.catalog import Agent, HttpAgent, RunInput
from service.agents.sse import ndjson_batches, sse_batches
from service.errors import InvalidJson
from service.log.chunks import loads

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
    client: httpx.AsyncClient, agent: HttpAgent, run_input: RunInput, idle_seconds: float
) -> AsyncIterator[list[Event]]:
    timeout = httpx.Timeout(connect=10.0, read=idle_seconds, write=30.0, pool=10.0)
    headers = {"Accept": "text/event-stream", **agent.headers}
    try:
        async with client.stream(
            "POST", agent.url, json=run_input, headers=headers, timeout=timeout
        ) as response:
            if response.status_code >= 400:
                body = (await response.aread())[:300].decode(errors="replace")
                detail = body or response.reason_phrase
                raise UpstreamError(f"upstream answered HTTP {response.status_code}: {detail}")
            media = response.headers.get("content-type", "").split(";")[0].strip().lower()
            reads = response.aiter_bytes()
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
    except httpx.ReadTimeout as exc:
        raise UpstreamError(f"upstream stalled: no event for {idle_seconds:g} s") from exc
    except httpx.ConnectError as exc:
        raise UpstreamError(f"cannot connect to upstream {agent.url}: {exc}") from exc
    except httpx.TransportError as exc:
        raise UpstreamError(f"upstream connection failed: {exc!r}") from exc


async def _python_events(agent: Any, run_input: RunInput) -> AsyncIterator[list[Event]]:
    number = 0
    async for chunk in agent.source(run_input):
        number += 1
        if not isinstance(chunk, dict) or not isinstance(chunk.get("type"), str):
            raise UpstreamError(f"agent event {number} is not an AG-UI event (no string 'type')")
        yield [(chunk, None)]


def events(
    agent: Agent, run_input: RunInput, client: httpx.AsyncClient, idle_seconds: float
) -> AsyncIterator[list[Event]]:
    """The upstream's events, a list per network read (a fast upstream's come together)."""
    if isinstance(agent, HttpAgent):
        return _http_events(client, agent, run_input, idle_seconds)
    return _python_events(agent, run_input)
