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
from tests.servers import Running, serve_in_process

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
