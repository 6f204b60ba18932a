"""TanStack AI's own ChatClient (npm, run by Node) against /v1/chat/demo.

A tab closes mid-answer; a new ChatClient on the same thread hydrates from
the server and joins the still-active run. Its final messages must equal
those of a client that never disconnected (same question, another thread),
and equal the service's own projection of the run.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.nodejs import cut_on_cue
from tests.support.relay import relay_to
from tests.support.servers import Running, serve_in_process

NODE = Path(__file__).resolve().parents[1] / "node"


@pytest.fixture(scope="module")
async def paced(database_url: str) -> AsyncIterator[Running]:
    # Paced like a model, so the first tab can close mid-answer.
    settings = settings_for(database_url, demo_delay_seconds=0.03)
    async with serve_in_process(settings) as running:
        yield running


def _normalized(messages: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """Ids that differ by construction (run id, client-minted ids) and clock times out."""
    text = json.dumps(messages).replace(run_id, "RUN")
    value: list[dict[str, Any]] = json.loads(
        re.sub(r'"createdAt": "[^"]*"', '"createdAt": 0', text)
    )
    for message in value:
        if message["role"] == "user":
            message["id"] = "USER"
    return value


async def test_chat_client_when_tab_closes_mid_answer_then_new_client_resumes_to_the_same_answer(
    paced: Running,
    node_harness: Path,
) -> None:
    result = await _run_node(paced.base_url)
    closed_run, plain_run = result["runs"]["closed"], result["runs"]["plain"]
    a, b, u = result["a"], result["b"], result["u"]
    # The first tab saw only part of the answer.
    assert len(json.dumps(a)) < len(json.dumps(b))
    assert _normalized(b, closed_run) == _normalized(u, plain_run)
    async with httpx.AsyncClient(base_url=paced.base_url) as http:
        projected = (await http.get(f"/v1/runs/{closed_run}/messages")).json()
    served = projected["messages"] if isinstance(projected, dict) else projected
    assistant = [m for m in b if m["role"] == "assistant"]
    assert _normalized(assistant, closed_run) == _normalized(served, closed_run)
    assert [m["role"] for m in b] == ["user", *(["assistant"] * len(assistant))]


async def _run_node(base_url: str) -> dict[str, Any]:
    import asyncio

    proc = await asyncio.create_subprocess_exec(
        "node", "chat.mjs", base_url, "th-tab-closed", "th-never-left",
        cwd=NODE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    value: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return value


async def test_chat_client_when_token_expired_at_reconnect_then_fetch_wrapper_resumes_once(
    database_url: str, node_harness: Path
) -> None:
    settings = settings_for(
        database_url,
        api_keys="k-chat-admin",
        token_secret="chat-token-secret-0123456789abcdef-0123456789",
        # Short enough to expire mid-answer; the answer streams for 13 s or more.
        token_ttl_seconds=2,
        demo_delay_seconds=0.5,
    )
    thread = "th-chat-token"
    async with serve_in_process(settings) as running, relay_to(running.base_url) as relay:
        # The cue: the client's stream is mid-answer and its token has expired.
        out, _ = await cut_on_cue(
            NODE, "chat_tokens.mjs", relay.url, thread, "k-chat-admin",
            relay=relay, cue=b"EXPIRED\n",
        )  # fmt: skip
        result = json.loads(out.strip().splitlines()[-1])
        run_id = next(c["runId"] for c in result["chunks"] if c["type"] == "RUN_STARTED")
        admin = {"Authorization": "Bearer k-chat-admin"}
        async with httpx.AsyncClient(base_url=running.base_url, headers=admin) as http:
            stored = (await http.get(f"/v1/runs/{run_id}/events", params={"limit": 1000})).json()
            projected = (await http.get(f"/v1/runs/{run_id}/messages")).json()
    assert result["error"] is None and result["finishedBeforeCut"] is False
    first = result["first"]
    before = [s for s in result["sent"] if s["phase"] == "before"]
    after = [s for s in result["sent"] if s["phase"] == "after"]
    # The run started with the first token, whose stream went on past its expiry.
    assert [(s["method"], s["status"], s["token"]) for s in before] == [("POST", 200, first)]
    assert [m["phase"] for m in result["minted"]] == ["before", "after"]
    fresh = result["minted"][1]["token"]
    assert fresh != first
    # The reconnect: refused with the expired token, then sent once more with the fresh one,
    # from the same Last-Event-ID. Once: nothing else was sent.
    assert [(s["method"], s["status"], s["token"]) for s in after] == [
        ("POST", 401, first),
        ("POST", 200, fresh),
    ], after
    assert after[0]["lastEventId"] == after[1]["lastEventId"] is not None
    # Every stored event reached the client exactly once, in order: no gap, no repeat.
    events = stored["events"] if isinstance(stored, dict) else stored
    # (The client adds fields of its own to some chunks, e.g. TOOL_CALL_START's toolName.)
    got = result["chunks"]
    assert len(got) == len(events)
    assert [{k: c.get(k) for k in e["chunk"]} for e, c in zip(events, got, strict=True)] == [
        e["chunk"] for e in events
    ]
    served = projected["messages"] if isinstance(projected, dict) else projected
    assistant = [m for m in result["messages"] if m["role"] == "assistant"]
    assert _normalized(assistant, run_id) == _normalized(served, run_id)
