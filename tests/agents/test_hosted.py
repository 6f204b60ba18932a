"""Hosted runs: the service drives an agent into the log, whoever listens."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.agents.conftest import follow
from tests.stream.wire import SseReader


async def start(http: httpx.AsyncClient, agent: str, **body: Any) -> str:
    body.setdefault("messages", [{"id": "u1", "role": "user", "content": "What's the weather?"}])
    r = await http.post(f"/v1/agents/{agent}/runs", json=body)
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    return run_id


async def test_demo_run_when_started_then_accepted_first_and_full_flow_logged_and_closed(
    http: httpx.AsyncClient,
) -> None:
    run_id = await start(http, "demo", threadId="th-demo")
    events = await follow(http, run_id)
    types = [e["type"] for e in events]
    assert events[0] == {**events[0], "type": "CUSTOM", "name": "run.accepted"}
    assert types[1] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    for kind in ("REASONING_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "TOOL_CALL_RESULT"):
        assert kind in types
    assert types.count("TEXT_MESSAGE_START") == 2
    assert events[1]["runId"] == run_id and events[1]["threadId"] == "th-demo"
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["closed"], run["agent"], run["tool_names"]) == (
        "finished",
        True,
        "demo",
        ["get_weather"],
    )


async def test_pydantic_ai_agent_when_driven_then_its_ag_ui_events_logged_verbatim(
    http: httpx.AsyncClient,
) -> None:
    run_id = await start(http, "pydantic", threadId="th-pyd")
    events = await follow(http, run_id)
    types = [e["type"] for e in events]
    assert types[0] == "CUSTOM" and types[1] == "RUN_STARTED" and types[-1] == "RUN_FINISHED"
    assert "TOOL_CALL_START" in types and "TOOL_CALL_RESULT" in types
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert starts[0]["toolCallName"] == "get_weather"
    assert events[1]["runId"] == run_id
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert run["status"] == "finished" and run["tool_names"] == ["get_weather"]


@pytest.mark.parametrize(
    ("agent", "says"),
    [
        ("drops", "upstream connection failed"),
        ("invalid-json", "is not valid JSON"),
        ("no-terminal", "ended without a terminal event"),
        ("stalls", "upstream stalled: no event for 1 s"),
        ("http-error", "upstream answered HTTP 503"),
        ("refused", "cannot connect to upstream"),
        ("broken-python", "the model client crashed"),
        ("too-deep", "upstream event 4 was refused: event 3 is nested 1000 levels deep"),
    ],
)
async def test_upstream_when_it_fails_then_run_error_says_why_and_earlier_events_kept(
    http: httpx.AsyncClient, agent: str, says: str
) -> None:
    run_id = await start(http, agent)
    events = await follow(http, run_id)
    last = events[-1]
    assert last["type"] == "RUN_ERROR" and says in last["message"], last
    assert last["runId"] == run_id
    if agent in ("drops", "invalid-json", "no-terminal", "stalls", "too-deep"):
        # What arrived before the failure is all there, in order.
        assert [e["type"] for e in events[1:4]] == [
            "RUN_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
        ]
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["closed"]) == ("error", True) and says in run["error"]


async def test_cancel_when_running_then_upstream_aborted_and_run_cancelled_and_closed(
    http: httpx.AsyncClient, upstream: tuple[str, Any]
) -> None:
    _, app = upstream
    state = app.state.slow
    run_id = await start(http, "slow")
    reader = SseReader()
    async with http.stream("GET", f"/v1/runs/{run_id}/stream") as response:
        chunks = response.aiter_bytes()
        while len(reader.events) < 10:
            reader.feed(await anext(chunks))
        r = await http.post(
            f"/v1/runs/{run_id}/cancel", headers={"Content-Type": "application/json"}
        )
        assert r.status_code == 200 and r.json()["status"] == "cancelled"
        async for data in chunks:
            reader.feed(data)
    await asyncio.wait_for(state["aborted"].wait(), 10)
    last = reader.events[-1][1]
    assert '"type":"RUN_ERROR"' in last and '"code":"cancelled"' in last
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["closed"], run["error_code"]) == ("cancelled", True, "cancelled")
    # Cancelling a closed run changes nothing.
    again = await http.post(
        f"/v1/runs/{run_id}/cancel", headers={"Content-Type": "application/json"}
    )
    assert again.json() == run
    assert (await http.get(f"/v1/runs/{run_id}/events")).json()["events"][-1][
        "seq"
    ] == reader.events[-1][0]


async def test_client_when_it_disconnects_mid_run_then_run_goes_on_to_the_end(
    http: httpx.AsyncClient,
) -> None:
    async with http.stream(
        "POST",
        "/v1/chat/demo",
        json={"threadId": "th-detach", "messages": []},
        headers={"X-Run-Id": "detach-1"},
    ) as response:
        reader = SseReader()
        chunks = response.aiter_bytes()
        while len(reader.events) < 5:
            reader.feed(await anext(chunks))
    # The tab is closed; a later reader finds the whole run.
    events = await follow(http, "detach-1")
    assert events[-1]["type"] == "RUN_FINISHED" and len(events) > 30


async def test_start_when_agent_unknown_then_404_agent_not_found(http: httpx.AsyncClient) -> None:
    r = await http.post("/v1/agents/nobody/runs", json={})
    assert r.status_code == 404 and r.json()["error"]["code"] == "agent_not_found"
    assert "demo" in r.json()["error"]["message"]


async def test_agents_listing_then_demo_and_configured_agents(http: httpx.AsyncClient) -> None:
    agents = {a["name"]: a["kind"] for a in (await http.get("/v1/agents")).json()["agents"]}
    assert agents["demo"] == "python" and agents["pydantic"] == "ag-ui-http"


@pytest.mark.parametrize(
    ("agent", "says", "kept"),
    [
        ("oversized", "upstream event 4 is over 1048576 bytes",
         ["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]),
        ("oversized-python", "agent event 2 is over 1048576 bytes", ["RUN_STARTED"]),
    ],
)  # fmt: skip
async def test_upstream_when_a_chunk_is_over_max_chunk_bytes_then_run_error_and_earlier_kept(
    http: httpx.AsyncClient, agent: str, says: str, kept: list[str]
) -> None:
    """Upstream chunks go through ingest like an append's: `max_chunk_bytes` applies."""
    run_id = await start(http, agent)
    events = await follow(http, run_id)
    assert [e["type"] for e in events] == ["CUSTOM", *kept, "RUN_ERROR"]
    assert events[-1]["message"] == says and events[-1]["code"] == "upstream_error"
    assert all(len(e.get("delta", "")) < 1 << 20 for e in events)
    run = (await http.get(f"/v1/runs/{run_id}")).json()
    assert (run["status"], run["closed"], run["error"]) == ("error", True, says)
