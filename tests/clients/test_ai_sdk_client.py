"""The Vercel AI SDK's own client (npm `ai`, oldest and newest supported majors) against
`/v1/ai-sdk/demo`, on two service processes.

A response that stops early (the client aborts after a few chunks, or a proxy cuts the
connection mid-stream) leaves the run going; `reconnectToStream` on the other process
replays it from `start` and follows it live, and `readUIMessageStream` over that ends with
the same assistant message as a chat that never left: text, reasoning, tool input and
output. Once nothing is active, `reconnectToStream` gets the 204 the client reads as null.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import Replicas, run_node
from tests.support.proxies import CuttingProxy


def _normalized(message: dict[str, Any]) -> dict[str, Any]:
    """Each chat's run has its own id (the message id, tool call ids, metadata)."""
    run_id = message["id"]
    text = json.dumps(message).replace(run_id, "RUN")
    value: dict[str, Any] = json.loads(re.sub(r'"threadId": "[^"]*"', '"threadId": "T"', text))
    return value


@pytest.mark.parametrize("package", ["ai5", "ai"])
async def test_ai_sdk_transport_when_response_stops_early_then_reconnect_ends_with_same_message(
    node_harness: Path, replicas: Replicas, package: str
) -> None:
    proxy = CuttingProxy(replicas.a_port, [1500])
    async with proxy as proxy_port:
        result = await run_node(
            node_harness, "ai_sdk.mjs", package, replicas.a,
            f"http://127.0.0.1:{proxy_port}", replicas.b, f"chat-{package}",
        )  # fmt: skip
    assert proxy.cuts == 1
    plain = result["plain"]
    assert [p["type"] for p in plain["parts"]] == [
        "text", "reasoning", "tool-get_weather", "text",
    ]  # fmt: skip
    assert plain["parts"][2]["state"] == "output-available"
    assert plain["parts"][2]["output"] == {"city": "Oslo", "tempC": -3, "conditions": "snow"}
    # Both interrupted responses really stopped early.
    assert len(result["abortedChunks"]) == 6 or result["abortedChunks"][-1].get("stopped")
    assert result["cutChunks"][-1].get("stopped"), result["cutChunks"][-1:]
    assert not any(c.get("type") == "finish" for c in result["cutChunks"])
    for resumed in ("abort", "cut"):
        assert result[resumed] is not None, resumed
        assert _normalized(result[resumed]) == _normalized(plain), resumed
    assert result["idle"] is None
    async with httpx.AsyncClient(base_url=replicas.b) as http:
        served = (await http.get(f"/v1/ai-sdk/demo/chat-{package}-plain/messages")).json()
    assert served[0] == {
        "id": "u1",
        "role": "user",
        "parts": [{"type": "text", "text": "Is it cold?"}],
    }
    assert served[1] == plain


async def test_ai_sdk_stream_when_posted_then_headers_and_frames_as_the_sdk_sends_them(
    replicas: Replicas,
) -> None:
    question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
    body = {"id": "chat-raw", "trigger": "submit-message", "messages": [question]}
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        response = await http.post("/v1/ai-sdk/demo", json=body)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
        assert response.headers["x-accel-buffering"] == "no"
        frames = [f for f in response.text.split("\n\n") if f]
        data = []
        for frame in frames:
            lines = [line for line in frame.split("\n") if not line.startswith((":", "id: "))]
            if not lines:
                continue  # a heartbeat comment
            assert len(lines) == 1 and lines[0].startswith("data: "), frame
            data.append(lines[0][len("data: ") :])
        assert data[-1] == "[DONE]"
        chunks = [json.loads(d) for d in data[:-1]]
        assert chunks[0]["type"] == "start" and chunks[-1]["type"] == "finish"
        idle = await http.get("/v1/ai-sdk/demo/chat-raw/stream")
        assert idle.status_code == 204
        unknown = await http.post("/v1/ai-sdk/nobody", json=body)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "agent_not_found"


@pytest.mark.parametrize(
    ("package", "approvals"), [("ai5", False), ("ai5", True), ("ai", False), ("ai", True)]
)
async def test_ai_sdk_transport_when_agent_asks_approval_then_each_major_gets_what_it_accepts(
    node_harness: Path, replicas: Replicas, package: str, approvals: bool
) -> None:
    api = f"{replicas.a}/v1/ai-sdk/approve" + ("?approvals=true" if approvals else "")
    chat = f"approve-{package}-{approvals}"
    result = await run_node(node_harness, "ai_sdk_chat.mjs", package, api, chat)
    if package == "ai5" and approvals:
        # The README's table: AI SDK 5 has no tool-approval-request and refuses the stream.
        assert "error" in result and "tool-approval-request" in result["error"], result
        return
    assert "error" not in result, result
    parts = result["message"]["parts"]
    tool = next(p for p in parts if p["type"] == "tool-delete_file")
    assert tool["input"] == {"path": "q3.pdf"}
    if approvals:
        assert tool["state"] == "approval-requested"
        assert tool["approval"]["id"].endswith("-ok")
    else:
        assert tool["state"] == "input-available"
        data = [p for p in parts if p["type"] == "data-approval-requested"]
        assert data and data[0]["data"]["approval"]["id"].endswith("-ok")


@pytest.mark.parametrize("package", ["ai5", "ai"])
async def test_ai_sdk_transport_when_agent_pauses_past_a_heartbeat_then_comment_and_client_reads_on(
    node_harness: Path, replicas: Replicas, package: str
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        question = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hm?"}]}
        raw = await http.post(
            "/v1/ai-sdk/paused", json={"id": f"paused-raw-{package}", "messages": [question]}
        )
    lines = raw.text.split("\n")
    first_delta = next(i for i, line in enumerate(lines) if '"text-delta"' in line)
    assert any(line.startswith(":") for line in lines[first_delta:]), raw.text
    api = f"{replicas.a}/v1/ai-sdk/paused"
    result = await run_node(node_harness, "ai_sdk_chat.mjs", package, api, f"paused-{package}")
    assert "error" not in result, result
    assert result["message"]["parts"] == [
        {"type": "text", "text": "Let me think... yes.", "state": "done"}
    ]


def _chat(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Client-minted user message ids and each chat's run id out."""
    normalized = []
    for message in messages:
        message = _normalized(message) if message["role"] == "assistant" else dict(message)
        if message["role"] == "user":
            message["id"] = "USER"
        normalized.append(message)
    return normalized


@pytest.mark.parametrize("package", ["ai5", "ai"])
async def test_ai_sdk_chat_when_tab_closes_mid_answer_then_resume_stream_ends_like_plain_chat(
    node_harness: Path, replicas: Replicas, package: str
) -> None:
    # The paused agent thinks for seconds after its first words: the tab closes in between.
    result = await run_node(
        node_harness, "ai_sdk_chat_resume.mjs", package, replicas.a, replicas.b,
        f"tab-{package}", "paused",
    )  # fmt: skip
    assert result["status"] == "ready"
    # The first tab saw part of the answer; the new tab starts from the user turn alone.
    assert len(json.dumps(result["closed"])) < len(json.dumps(result["plain"]))
    assert [m["role"] for m in result["hydrated"]] == ["user"]
    assert _chat(result["resumed"]) == _chat(result["plain"])
    assert result["resumed"][-1]["parts"][-1]["text"] == "Let me think... yes."
