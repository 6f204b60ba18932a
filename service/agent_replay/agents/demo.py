"""The built-in `demo` agent: no network, deterministic, paced like a model.

It streams a reasoning block, a first text segment, a tool call whose
arguments arrive in pieces, the tool's result, and a second text segment, so
the whole flow (and every part type the projector builds) shows up at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from agent_replay.agents.catalog import PythonAgent, RunInput


def _last_user_text(run_input: RunInput) -> str:
    for message in reversed(run_input.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return " ".join(
                    p.get("text", "")
                    for p in content
                    if isinstance(p, dict) and p.get("type") == "text"
                )
    return "hello"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def demo_agent(delay: float) -> PythonAgent:
    async def run(run_input: RunInput) -> AsyncIterator[dict[str, Any]]:
        run_id = str(run_input.get("runId"))
        thread_id = str(run_input.get("threadId"))
        question = _last_user_text(run_input)[:200]
        ids = {k: f"{run_id}-{k}" for k in ("reasoning", "text-1", "call", "result", "text-2")}

        def chunk(kind: str, **fields: Any) -> dict[str, Any]:
            return {"type": kind, **fields, "timestamp": int(time.time() * 1000)}

        async def pace() -> None:
            await asyncio.sleep(delay)

        yield chunk("RUN_STARTED", threadId=thread_id, runId=run_id)
        # The text message opens before the reasoning: TanStack's ChatClient,
        # rejoining a run, drops the last assistant message at the first
        # TEXT_MESSAGE_START it replays, which would be the reasoning's own
        # message had reasoning come first (and the rejoined answer would lose it).
        text = ids["text-1"]
        yield chunk("TEXT_MESSAGE_START", messageId=text, role="assistant")
        reasoning = ids["reasoning"]
        yield chunk("REASONING_START", messageId=reasoning)
        yield chunk("REASONING_MESSAGE_START", messageId=reasoning, role="reasoning")
        for piece in _pieces(f"The user said: {question!r}. I should check the weather tool.", 12):
            await pace()
            yield chunk("REASONING_MESSAGE_CONTENT", messageId=reasoning, delta=piece)
        yield chunk("REASONING_MESSAGE_END", messageId=reasoning)
        yield chunk("REASONING_END", messageId=reasoning)

        for piece in _pieces(f"You said “{question}”. Let me look up the weather in Oslo. ", 8):
            await pace()
            yield chunk("TEXT_MESSAGE_CONTENT", messageId=text, delta=piece)
        call = ids["call"]
        yield chunk(
            "TOOL_CALL_START", toolCallId=call, toolCallName="get_weather", parentMessageId=text
        )
        for piece in _pieces(json.dumps({"city": "Oslo", "units": "metric"}), 6):
            await pace()
            yield chunk("TOOL_CALL_ARGS", toolCallId=call, delta=piece)
        yield chunk("TOOL_CALL_END", toolCallId=call)
        await pace()
        result = {"city": "Oslo", "tempC": -3, "conditions": "snow"}
        yield chunk(
            "TOOL_CALL_RESULT", messageId=ids["result"], toolCallId=call,
            content=json.dumps(result), role="tool",
        )  # fmt: skip
        yield chunk("TEXT_MESSAGE_END", messageId=text)

        second = ids["text-2"]
        yield chunk("TEXT_MESSAGE_START", messageId=second, role="assistant")
        for piece in _pieces("It is -3 °C and snowing in Oslo ❄️. Dress warmly!", 8):
            await pace()
            yield chunk("TEXT_MESSAGE_CONTENT", messageId=second, delta=piece)
        yield chunk("TEXT_MESSAGE_END", messageId=second)
        yield chunk("RUN_FINISHED", threadId=thread_id, runId=run_id, finishReason="stop")

    return PythonAgent("demo", run)
