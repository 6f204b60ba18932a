"""An AI SDK backend made durable: the service hosts an upstream that speaks the UI message
stream (`"protocol": "ai-sdk"`), and the AI SDK's own client sees through the service what it
sees talking to the upstream directly.

The upstream is the real `ai` package (`streamText` with its mock model from `ai/test`,
`createUIMessageStreamResponse`), 5, 6 and 7, in tests/node/ai_sdk_upstream.mjs: text,
reasoning, tool calls with streamed input, tool results, a tool error, sources, files, data
parts, message metadata, a model error. The client is the stock `DefaultChatTransport`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import run_node
from tests.conftest import settings_for
from tests.support.proxies import CuttingProxy
from tests.support.servers import Running, serve_in_process

SCENARIOS = ("full", "error", "gated")


@asynccontextmanager
async def ai_sdk_backend(harness: Path, package: str) -> AsyncIterator[str]:
    """tests/node/ai_sdk_upstream.mjs on a free port; yields its base URL."""
    proc = await asyncio.create_subprocess_exec(
        "node", "ai_sdk_upstream.mjs", package, cwd=harness,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not line:
            pytest.fail((await proc.stderr.read()).decode()[-3000:])
        yield f"http://127.0.0.1:{json.loads(line)['port']}"
    finally:
        proc.kill()
        await proc.wait()


def as_direct(shown: dict[str, Any], chat: str | None = None) -> dict[str, Any]:
    """What a chat through the service shows, as a direct chat would: the answer's id is
    the run's (made ANSWER here, as `anonymous` makes the upstream's), and its metadata holds
    the run's and thread's ids besides the producer's (`chat`: the chat id the upstream's
    metadata echoes, made the direct chat's)."""
    *earlier, answer = shown["messages"]
    metadata = dict(answer["metadata"])
    assert metadata.pop("runId") == answer["id"]
    assert isinstance(metadata.pop("threadId"), str)
    if chat is not None:
        metadata["chat"] = chat
    answer = {**answer, "id": "ANSWER", "metadata": metadata}
    return {**shown, "messages": [*earlier, answer]}


def anonymous(shown: dict[str, Any]) -> dict[str, Any]:
    *earlier, answer = shown["messages"]
    return {**shown, "messages": [*earlier, {**answer, "id": "ANSWER"}]}


@pytest.mark.parametrize("package", ["ai5", "ai6", "ai"])
async def test_ai_sdk_upstream_hosted_when_read_by_use_chat_then_same_as_upstream_directly(
    node_harness: Path, database_url: str, package: str
) -> None:
    async with ai_sdk_backend(node_harness, package) as upstream:
        agents = {
            f"ai-{name}": {"url": f"{upstream}/api/chat/{name}", "protocol": "ai-sdk"}
            for name in SCENARIOS
        }
        settings = settings_for(database_url, heartbeat_seconds=1.0, agents=json.dumps(agents))
        async with serve_in_process(settings) as service:
            # The first connection through it (a POST of the `cut` chat) is cut mid-answer.
            proxy = CuttingProxy(int(service.base_url.rsplit(":", 1)[1]), [1500])
            async with proxy as proxy_port:
                result = await run_node(
                    node_harness, "ai_sdk_durable.mjs", package, upstream, service.base_url,
                    f"chat-{package}", f"http://127.0.0.1:{proxy_port}",
                )  # fmt: skip
            assert proxy.cuts == 1
            # The same backend's answer read by AG-UI's own client, through the service.
            ag_ui = await run_node(node_harness, "ag_ui_of_ai_sdk.mjs", service.base_url, "ai-full")
            async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as http:
                run_id = result["full"]["served"]["messages"][-1]["id"]
                events = (await http.get(f"/v1/runs/{run_id}/events")).json()["events"]
                # What a page reloaded after the answers starts useChat({ messages }) from.
                reloaded = {
                    name: (await http.get(f"/v1/ai-sdk/ai-{name}/chat-{package}-{name}/messages"))
                    .json() for name in SCENARIOS
                }  # fmt: skip
            async with httpx.AsyncClient(base_url=upstream, timeout=30) as http:
                requests = (await http.get("/requests")).json()

    full = result["full"]
    direct = full["direct"]["messages"][-1]
    assert full["direct"]["status"] == "ready" and full["direct"]["error"] is None
    assert [p["type"] for p in direct["parts"]] == [
        "data-status", "step-start", "reasoning", "text", "tool-weather", "tool-broken",
        "source-url", "file", "step-start", "text",
    ]  # fmt: skip
    assert direct["parts"][4]["state"] == "output-available"
    assert direct["parts"][4]["output"] == {"city": "Paris", "temperature": 21}
    assert direct["parts"][5]["state"] == "output-error"
    assert direct["metadata"] == {"model": "mock", "chat": f"chat-{package}-full-d",
                                  "finishedBy": "mock", "steps": 2}  # fmt: skip
    for name in ("full", "error"):
        shown = result[name]
        assert as_direct(shown["served"], f"chat-{package}-{name}-d") == anonymous(
            shown["direct"]
        ), name
    error = result["error"]["direct"]
    assert error["status"] == "error" and error["error"] == "An error occurred."
    assert error["messages"][-1]["parts"][-1] == {
        "type": "text", "text": "Starting", "state": "streaming"
    }  # fmt: skip

    gated = result["gated"]
    # The first tab stopped mid-answer; the second resumed it to its end.
    closed = gated["closed"][-1]["parts"][-1]
    assert closed["state"] == "streaming" and len(closed["text"].split()) < 40
    assert [m["role"] for m in gated["hydrated"]] == ["user"]
    resumed = as_direct(gated["resumed"], f"chat-{package}-gated-d")
    assert resumed == anonymous(gated["direct"])
    assert len(resumed["messages"][-1]["parts"][-1]["text"].split()) == 40

    cut = result["cut"]
    assert cut["cut"]["status"] == "error", cut["cut"]
    assert as_direct(cut["resumed"], f"chat-{package}-gated-d") == anonymous(gated["direct"])

    # A reloaded page starts from the messages useChat held at the end.
    assert reloaded["full"] == result["full"]["served"]["messages"]
    assert reloaded["gated"] == result["gated"]["resumed"]["messages"]

    # The service posted the chat request as useChat posts it to the upstream.
    bodies = {r["body"]["id"]: r["body"] for r in requests}
    for name in SCENARIOS:
        through, straight = bodies[f"chat-{package}-{name}"], bodies[f"chat-{package}-{name}-d"]
        assert {**through, "id": straight["id"]} == straight
        assert straight["model"] == "fast"  # the transport's body fields too

    # AG-UI's client read the run without an error: the text, the calls and their results.
    assert ag_ui["error"] is None, ag_ui
    assert ag_ui["types"][0] == "RUN_STARTED" and ag_ui["types"][-1] == "RUN_FINISHED"
    said = [m.get("content") for m in ag_ui["messages"] if m["role"] == "assistant"]
    assert "Let me look that up." in said and "It is 21 degrees in Paris." in said
    calls = [c["function"] for m in ag_ui["messages"] for c in m.get("toolCalls") or []]
    assert calls == [{"name": "weather", "arguments": '{"city": "Paris"}'},
                     {"name": "broken", "arguments": '{"why":"test"}'}]  # fmt: skip
    results = {m["toolCallId"]: m["content"] for m in ag_ui["messages"] if m["role"] == "tool"}
    assert json.loads(results["call-1"]) == {"city": "Paris", "temperature": 21}

    # The log holds AG-UI events, read by every other client family.
    types = [e["type"] for e in events]
    assert types[:2] == ["CUSTOM", "RUN_STARTED"] and types[-1] == "RUN_FINISHED"
    assert {"TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS",
            "TOOL_CALL_RESULT", "STEP_STARTED"} <= set(types)  # fmt: skip


@pytest.mark.parametrize("package", ["ai5", "ai6", "ai"])
async def test_every_chunk_type_when_pushed_then_use_chat_shows_what_it_shows_directly(
    node_harness: Path, service: Running, package: str
) -> None:
    # tests/node/ai_sdk_pushed.mjs: every chunk type the major knows, pushed with
    # ?format=ai-sdk and resumed through the service, against the same chunks served directly.
    result = await run_node(
        node_harness, "ai_sdk_pushed.mjs", package, service.base_url, f"push-{package}"
    )
    direct, served = result["direct"], result["served"]
    assert (direct["status"], direct["error"]) == ("ready", None)
    answer = direct["messages"][-1]
    assert {"reasoning", "text", "tool-weather", "dynamic-tool", "tool-fails", "source-url",
            "source-document", "file", "data-weather", "data-state"} <= {
        p["type"] for p in answer["parts"]
    }  # fmt: skip
    assert answer["metadata"] == {"model": "m", "usage": {"inputTokens": 3}, "done": True}
    assert as_direct(served) == anonymous(direct)
