"""In-process Python agents named by REPLAY_AGENTS in the tests."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any


async def broken(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "RUN_STARTED", "threadId": run_input["threadId"], "runId": run_input["runId"]}
    raise RuntimeError("the model client crashed")


async def oversized(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "RUN_STARTED", "threadId": run_input["threadId"], "runId": run_input["runId"]}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * (1 << 20)}
    yield {"type": "RUN_FINISHED", "threadId": run_input["threadId"], "runId": run_input["runId"]}


# The runs whose `endless` generator was closed (its cleanup ran), in this process.
CLOSED: set[str] = set()


async def endless(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """Text without end and without ever waiting: only its run's budget stops it."""
    try:
        yield {"type": "RUN_STARTED", "threadId": run_input["threadId"],
               "runId": run_input["runId"]}  # fmt: skip
        yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
        while True:
            yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}
    finally:
        CLOSED.add(run_input["runId"])


async def scripted(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The events its input's `forwardedProps.events` lists, one read each."""
    for event in run_input["forwardedProps"]["events"]:
        yield event


# Gates of `gated` runs, by run id: set by a test to let the run finish.
GATES: dict[str, asyncio.Event] = {}


async def gated(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """Its input's `forwardedProps.events`, then RUN_FINISHED once its gate is set."""
    gate = GATES.setdefault(run_input["runId"], asyncio.Event())
    for event in run_input["forwardedProps"]["events"]:
        yield event
    await gate.wait()
    yield {"type": "RUN_FINISHED", "threadId": run_input["threadId"], "runId": run_input["runId"]}
