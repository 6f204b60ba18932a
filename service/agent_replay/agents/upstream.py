"""Where a hosted run's events come from: a Python generator here, an AG-UI HTTP
agent in `agent_replay.agents.wire`.

Every source gives lists of `StoredChunk`s, validated by ingest like any
append (so `max_chunk_bytes` applies); when the upstream sent JSON text, that
text is what the log stores. Failures are `UpstreamError`s with a message fit
for the run's RUN_ERROR; what came before a bad event is given first.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from agent_replay.agents.catalog import PythonAgent, RunInput
from agent_replay.errors import (
    InvalidEvent,
    InvalidInput,
    InvalidJson,
    NestedTooDeep,
    PayloadTooLarge,
)
from agent_replay.ingest import Limits, chunk_from_value
from agent_replay.log.values import StoredChunk


class UpstreamError(Exception):
    """The upstream failed; the message says how, for a person reading the run."""


def refused(
    exc: InvalidInput, number: int, limits: Limits, source: str = "upstream", ui: bool = False
) -> UpstreamError:
    """Ingest's refusal of event `number` (`ui`: a UI message stream chunk), worded for
    the run's RUN_ERROR."""
    event = f"{source} event {number}"
    if isinstance(exc, InvalidJson):
        return UpstreamError(f"{event} is not valid JSON: {exc.message}")
    if isinstance(exc, PayloadTooLarge):
        return UpstreamError(f"{event} is over {limits.max_chunk_bytes} bytes")
    if isinstance(exc, NestedTooDeep):
        return UpstreamError(f"{event} was refused: {exc.message}")
    if isinstance(exc, InvalidEvent) and ui:
        return UpstreamError(f"{event} is not a UI message stream chunk: {exc.message}")
    if isinstance(exc, InvalidEvent):
        return UpstreamError(f"{event} is not an AG-UI event (no string 'type')")
    return UpstreamError(f"{event} was refused: {exc.message}")


async def _python_events(
    agent: Any, run_input: RunInput, limits: Limits
) -> AsyncGenerator[list[StoredChunk], None]:
    number = 0
    source = agent.source(run_input)
    try:
        async for value in source:
            number += 1
            try:
                chunk = chunk_from_value(value, number - 1, limits)
            except InvalidInput as exc:
                raise refused(exc, number, limits, source="agent") from exc
            yield [chunk]
    finally:
        # Stopped early (a cancel, a budget): the agent's own cleanup runs now, not
        # whenever the garbage collector finds its generator.
        close = getattr(source, "aclose", None)
        if close is not None:
            await close()


def events(
    agent: PythonAgent, run_input: RunInput, limits: Limits
) -> AsyncGenerator[list[StoredChunk], None]:
    """An in-process agent's events, a list each (an HTTP agent's: `agent_replay.agents.wire`)."""
    return _python_events(agent, run_input, limits)
