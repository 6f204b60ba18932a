"""In-process agents the fault tests name in REPLAY_AGENTS."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

PACED_DELTAS = 150
PACED_SECONDS = 0.1
# Slow enough to outlast a minute's outage that begins a few deltas in.
SLOW_DELTAS = 90
SLOW_SECONDS = 0.75


async def _answer(run_input: dict[str, Any], deltas: int, seconds: float) -> AsyncIterator[Any]:
    """A text answer of `deltas` numbered deltas, one every `seconds`."""
    ids = {"threadId": run_input["threadId"], "runId": run_input["runId"]}
    yield {"type": "RUN_STARTED", **ids}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    for n in range(1, deltas + 1):
        await asyncio.sleep(seconds)
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"<{n}>"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "m"}
    yield {"type": "RUN_FINISHED", **ids}


def paced(run_input: dict[str, Any]) -> AsyncIterator[Any]:
    """PACED_DELTAS deltas, one every PACED_SECONDS."""
    return _answer(run_input, PACED_DELTAS, PACED_SECONDS)


def slow(run_input: dict[str, Any]) -> AsyncIterator[Any]:
    """SLOW_DELTAS deltas, one every SLOW_SECONDS."""
    return _answer(run_input, SLOW_DELTAS, SLOW_SECONDS)


# A chat answer's length (tests/faults/test_drain.py): 20 s, few enough events for 20 at once.
STEADY_DELTAS = 100
STEADY_SECONDS = 0.2


def steady(run_input: dict[str, Any]) -> AsyncIterator[Any]:
    """STEADY_DELTAS deltas, one every STEADY_SECONDS."""
    return _answer(run_input, STEADY_DELTAS, STEADY_SECONDS)
