"""In-process agents the fault tests name in REPLAY_AGENTS."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

PACED_DELTAS = 150
PACED_SECONDS = 0.1


async def paced(run_input: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """A text answer of PACED_DELTAS numbered deltas, one every PACED_SECONDS."""
    ids = {"threadId": run_input["threadId"], "runId": run_input["runId"]}
    yield {"type": "RUN_STARTED", **ids}
    yield {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}
    for n in range(1, PACED_DELTAS + 1):
        await asyncio.sleep(PACED_SECONDS)
        yield {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"<{n}>"}
    yield {"type": "TEXT_MESSAGE_END", "messageId": "m"}
    yield {"type": "RUN_FINISHED", **ids}
