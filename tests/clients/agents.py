"""In-process agents for the client tests (`python:tests.clients.agents:<name>`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

# Longer than the replicas' heartbeat interval (tests/clients/conftest.py).
PAUSE_SECONDS = 2.5


async def approval(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """Asks for approval before a tool call, as TanStack AI's server does (a CUSTOM event)."""
    run, thread = run_input["runId"], run_input["threadId"]
    call = f"{run}-call"
    yield {"type": "RUN_STARTED", "runId": run, "threadId": thread}
    yield {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-text", "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-text", "delta": "May I?"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-text"}
    yield {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "delete_file"}
    yield {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": '{"path": "q3.pdf"}'}
    yield {"type": "TOOL_CALL_END", "toolCallId": call}
    yield {
        "type": "CUSTOM",
        "name": "approval-requested",
        "value": {"toolCallId": call, "toolName": "delete_file", "approval": {"id": f"{run}-ok"}},
    }
    yield {"type": "RUN_FINISHED", "runId": run, "threadId": thread, "finishReason": "tool_calls"}


async def paused(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """Thinks for longer than a heartbeat interval between two deltas."""
    run, thread = run_input["runId"], run_input["threadId"]
    yield {"type": "RUN_STARTED", "runId": run, "threadId": thread}
    yield {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-text", "role": "assistant"}
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-text", "delta": "Let me think"}
    await asyncio.sleep(PAUSE_SECONDS)
    yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-text", "delta": "... yes."}
    yield {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-text"}
    yield {"type": "RUN_FINISHED", "runId": run, "threadId": thread, "finishReason": "stop"}
