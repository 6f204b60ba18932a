"""Budgets of hosted runs on two real replicas, against a scripted upstream that never stops.

Every run is started on replica A and followed, listed and read on replica B:
whichever replica drives a run enforces its budget, and what it wrote is what
the other serves. The upstream (`tests.agents.upstreams.Scripted`) records per
run whether its client went away before it finished: an abort is what the
upstream saw, never inferred from the service's answer.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Route

from agent_replay.agents.budget import exhausted
from tests.agents.upstreams import Scripted
from tests.stream.wire import SseReader
from tests.support.servers import serve_asgi, serve_subprocess

LEASE = 5.0  # renewed every 1.7 s
# The killed driver's run: its time runs out between the kill and its lease's end, so
# only the survivor's reaper can end it, and must end it `budget_exhausted`.
KILLED_MAX_SECONDS = 4.0


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[tuple[str, Scripted]]:
    agent = Scripted()
    app = Starlette(routes=[Route("/scripted", agent.endpoint, methods=["POST"])])
    async with serve_asgi(app) as base:
        yield base, agent


def _env(database_url: str, base: str) -> dict[str, str]:
    url = f"{base}/scripted"
    agents = {
        "scripted": url,
        "capped": {"url": url, "budget": {"max_events": 8}},
        "endless": "python:tests.agents.pyagents:endless",
    }
    return {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_LEASE_SECONDS": str(LEASE),
        "REPLAY_AGENTS": json.dumps(agents),
    }


@pytest.fixture(scope="module")
def replicas(database_url: str, upstream: tuple[str, Scripted]) -> Iterator[tuple[str, str]]:
    env = _env(database_url, upstream[0])
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield a, b


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


@pytest.fixture
def agent(upstream: tuple[str, Scripted]) -> Scripted:
    return upstream[1]


async def _start(
    http: httpx.AsyncClient,
    base: str,
    script: str,
    *,
    budget: Any = None,
    headers: dict[str, str] | None = None,
    agent: str = "scripted",
    **props: Any,
) -> str:
    body: dict[str, Any] = {"forwardedProps": {"script": script, **props}}
    if budget is not None:
        body["budget"] = budget
    r = await http.post(f"{base}/v1/agents/{agent}/runs", json=body, headers=headers or {})
    assert r.status_code == 201, r.text
    run_id: str = r.json()["run_id"]
    return run_id


async def _follow_to_end(http: httpx.AsyncClient, base: str, run_id: str) -> list[dict[str, Any]]:
    """The run's events, from its stream, until the service ends the stream (the run closed)."""
    reader = SseReader()
    async with http.stream("GET", f"{base}/v1/runs/{run_id}/stream") as r:
        assert r.status_code == 200
        async for data in r.aiter_bytes():
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, len(reader.events) + 1))
    return [json.loads(text) for _, text in reader.events]


async def _run(http: httpx.AsyncClient, base: str, run_id: str) -> dict[str, Any]:
    run: dict[str, Any] = (await http.get(f"{base}/v1/runs/{run_id}")).json()
    return run


def _upstream_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What the upstream streamed and the log kept: without the service's own first and last."""
    assert events[0]["type"] == "CUSTOM" and events[0]["name"] == "run.accepted"
    return events[1:-1]


async def _assert_exhausted(
    http: httpx.AsyncClient, base: str, agent: Scripted, run_id: str, events: list[dict[str, Any]],
    message: str,
) -> None:  # fmt: skip
    """The run ended as a budget ends it, everywhere it shows, and its upstream was aborted."""
    last = events[-1]
    assert (last["type"], last["code"], last["message"]) == ("RUN_ERROR", "budget_exhausted",
                                                             message)  # fmt: skip
    run = await _run(http, base, run_id)
    assert (run["status"], run["closed"], run["error_code"]) == ("cancelled", True,
                                                                 "budget_exhausted")  # fmt: skip
    listed = await http.get(f"{base}/v1/runs", params={"error_code": "budget_exhausted",
                                                       "limit": 500})  # fmt: skip
    assert run_id in [r["run_id"] for r in listed.json()["runs"]]
    async with asyncio.timeout(10):
        await agent.event(agent.aborted, run_id).wait()
    assert run_id not in agent.finished
    # The budget is the service's: the agent was never sent it.
    assert "budget" not in agent.inputs[run_id]
    assert "budget" not in json.dumps(agent.inputs[run_id].get("forwardedProps"))


@pytest.mark.parametrize(
    ("script", "budget", "header", "message"),
    [
        ("text", {"max_events": 12}, None, exhausted("max_events", 12)),
        ("tools", None, "max_tool_calls=3", exhausted("max_tool_calls", 3)),
        ("text", {"max_output_tokens": 20}, None, exhausted("max_output_tokens", 20)),
        ("usage", "max_output_tokens=60", None, exhausted("max_output_tokens", 60)),
        ("text", None, "max_seconds=2", exhausted("max_seconds", 2.0)),
    ],
    ids=["max_events-body", "max_tool_calls-header", "max_output_tokens-counted",
         "max_output_tokens-reported", "max_seconds-header"],
)  # fmt: skip
async def test_budget_exceeded_by_upstream_on_replica_a_then_b_serves_run_budget_exhausted(
    replicas: tuple[str, str],
    http: httpx.AsyncClient,
    agent: Scripted,
    script: str,
    budget: Any,
    header: str | None,
    message: str,
) -> None:
    a, b = replicas
    headers = {"X-Budget": header} if header else None
    run_id = await _start(http, a, script, budget=budget, headers=headers, pace=0.02)
    events = await _follow_to_end(http, b, run_id)
    await _assert_exhausted(http, b, agent, run_id, events, message)
    upstream = _upstream_events(events)
    run = await _run(http, b, run_id)
    if script == "text" and budget == {"max_events": 12}:
        # Exactly the budget's worth: the upstream streamed on, the rest was never stored.
        assert len(upstream) == 12
        assert run["metadata"]["budget"] == {"max_events": 12}
    elif script == "tools":
        starts = [e for e in upstream if e["type"] == "TOOL_CALL_START"]
        assert [e["toolCallId"] for e in starts] == ["call-0", "call-1", "call-2"]
        # The third call was stored whole: only the fourth's start was past the budget.
        assert upstream[-1]["type"] == "TOOL_CALL_RESULT"
    elif script == "text":
        if header == "max_seconds=2":
            created = datetime.fromisoformat(run["created_at"])
            closed = datetime.fromisoformat(run["closed_at"])
            assert (closed - created).total_seconds() >= 2
            assert run["metadata"]["budget"] == {"max_seconds": 2.0}
        else:
            # Counted from the text: ceil(characters / 4), 5 characters a delta, 20 tokens.
            chars = sum(len(e["delta"]) for e in upstream if e["type"] == "TEXT_MESSAGE_CONTENT")
            assert math.ceil(chars / 4) <= 20 < math.ceil((chars + 5) / 4)
    else:
        # Reported: 25 a step; the third report (75) is past 60, its text (1 token) was not.
        reports = [e["usage"]["completionTokens"] for e in upstream if "usage" in e]
        assert reports == [25, 25]
        assert upstream[-1] == {"type": "TEXT_MESSAGE_END", "messageId": "m-2"}


async def test_run_within_its_budget_then_finishes_as_its_upstream_ends(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Scripted
) -> None:
    a, b = replicas
    budget = "max_seconds=60,max_events=40,max_tool_calls=3,max_output_tokens=1000"
    run_id = await _start(http, a, "tools", headers={"X-Budget": budget}, steps=3)
    events = await _follow_to_end(http, b, run_id)
    assert events[-1]["type"] == "RUN_FINISHED"
    run = await _run(http, b, run_id)
    assert (run["status"], run["error_code"]) == ("finished", None)
    assert run_id in agent.finished


async def test_agent_budget_when_request_asks_for_more_then_agents_holds_and_less_tightens(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Scripted
) -> None:
    a, b = replicas
    looser = await _start(http, a, "text", agent="capped", budget={"max_events": 1000})
    events = await _follow_to_end(http, b, looser)
    await _assert_exhausted(http, b, agent, looser, events, exhausted("max_events", 8))
    assert len(_upstream_events(events)) == 8
    assert (await _run(http, b, looser))["metadata"]["budget"] == {"max_events": 8}
    # The transcript shows the status with its code, and the error turn names the budget.
    transcript = (await http.get(f"{b}/v1/runs/{looser}/transcript")).text
    assert "cancelled (budget_exhausted)" in transcript
    assert "max_events=8" in transcript and "(code budget_exhausted)" in transcript

    tighter = await _start(
        http, a, "text", agent="capped", headers={"X-Budget": "max_events=3,max_seconds=60"}
    )
    events = await _follow_to_end(http, b, tighter)
    await _assert_exhausted(http, b, agent, tighter, events, exhausted("max_events", 3))
    assert len(_upstream_events(events)) == 3
    stored = (await _run(http, b, tighter))["metadata"]["budget"]
    assert stored == {"max_events": 3, "max_seconds": 60.0}


async def test_start_retried_when_same_budget_then_joins_and_other_budget_then_conflict(
    replicas: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = replicas
    body = {"runId": "budget-retry-1", "forwardedProps": {"script": "text"},
            "budget": {"max_events": 5}}  # fmt: skip
    first = await http.post(f"{a}/v1/agents/scripted/runs", json=body)
    again = await http.post(f"{b}/v1/agents/scripted/runs", json=body)
    other = await http.post(
        f"{b}/v1/agents/scripted/runs", json={**body, "budget": {"max_events": 6}}
    )
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["started"] is False
    assert other.status_code == 409 and other.json()["error"]["code"] == "run_conflict"
    events = await _follow_to_end(http, b, "budget-retry-1")
    assert len(_upstream_events(events)) == 5


async def test_in_process_agent_that_never_waits_when_over_budget_then_stopped_and_closed(
    replicas: tuple[str, str], http: httpx.AsyncClient
) -> None:
    a, b = replicas
    r = await http.post(f"{a}/v1/agents/endless/runs", json={"budget": {"max_events": 50}})
    run_id = r.json()["run_id"]
    events = await _follow_to_end(http, b, run_id)
    assert len(_upstream_events(events)) == 50
    assert (events[-1]["code"], events[-1]["message"]) == (
        "budget_exhausted", exhausted("max_events", 50))  # fmt: skip
    assert (await _run(http, b, run_id))["status"] == "cancelled"


async def _stream_to_end(response: httpx.Response) -> None:
    async for _ in response.aiter_bytes():
        pass


async def test_every_start_route_when_x_budget_given_then_its_run_ends_budget_exhausted(
    replicas: tuple[str, str], http: httpx.AsyncClient, agent: Scripted
) -> None:
    a, b = replicas
    headers = {"X-Budget": "max_events=4"}
    props = {"script": "text", "pace": 0.02}
    run_ids = []
    for route, run_id in (("/v1/chat/scripted", "budget-chat"),
                          ("/v1/agents/scripted/ag-ui", "budget-agui")):  # fmt: skip
        body = {"runId": run_id, "threadId": f"th-{run_id}", "forwardedProps": props}
        async with http.stream("POST", f"{a}{route}", json=body, headers=headers) as r:
            assert r.status_code == 200
            await _stream_to_end(r)
        run_ids.append(run_id)
    body = {"id": "th-budget-ai-sdk", "messages": [], **props}
    async with http.stream("POST", f"{a}/v1/ai-sdk/scripted", json=body, headers=headers) as r:
        assert r.status_code == 200
        await _stream_to_end(r)
    listed = await http.get(f"{b}/v1/runs", params={"thread_id": "th-budget-ai-sdk"})
    run_ids.append(listed.json()["runs"][0]["run_id"])
    for run_id in run_ids:
        events = await _follow_to_end(http, b, run_id)
        await _assert_exhausted(http, b, agent, run_id, events, exhausted("max_events", 4))
        assert len(_upstream_events(events)) == 4


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        ({"budget": {"max_events": 0}}, {}),
        ({"budget": {"max_seconds": -1}}, {}),
        ({"budget": {"max_steps": 3}}, {}),
        ({"budget": {"max_tool_calls": 2.5}}, {}),
        ({"budget": 30}, {}),
        ({"budget": "max_seconds=soon"}, {}),
        ({}, {"X-Budget": "max_seconds"}),
        ({}, {"X-Budget": "max_events=1,max_events=2"}),
        ({}, {"X-Budget": "max_output_tokens=-5"}),
        ({"budget": {"max_events": 5}}, {"X-Budget": "max_time=5"}),
    ],
)
async def test_start_when_budget_malformed_then_422_invalid_budget_on_every_route_and_no_run(
    replicas: tuple[str, str],
    http: httpx.AsyncClient,
    agent: Scripted,
    body: dict[str, Any],
    headers: dict[str, str],
) -> None:
    a, b = replicas
    run_id = f"bad-budget-{abs(hash(json.dumps([body, headers])))}"
    props = {"forwardedProps": {"script": "text"}}
    for path in ("/v1/agents/scripted/runs", "/v1/agents/scripted/ag-ui", "/v1/chat/scripted"):
        r = await http.post(f"{a}{path}", json={**body, **props, "runId": run_id}, headers=headers)
        assert r.status_code == 422, (path, r.text)
        assert r.json()["error"]["code"] == "invalid_budget"
    chat = {"id": f"th-{run_id}", "messages": [], **body}
    r = await http.post(f"{a}/v1/ai-sdk/scripted", json=chat, headers=headers)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_budget"
    # Nothing started: no run, none on the AI SDK chat's thread, no upstream called.
    assert (await http.get(f"{b}/v1/runs/{run_id}")).status_code == 404
    listed = await http.get(f"{b}/v1/runs", params={"thread_id": f"th-{run_id}"})
    assert listed.json()["runs"] == []
    assert run_id not in agent.started


async def test_driver_killed_before_max_seconds_then_survivor_ends_run_budget_exhausted_within_a_lease(  # noqa: E501
    database_url: str, upstream: tuple[str, Scripted], http: httpx.AsyncClient
) -> None:
    base, _ = upstream
    env = _env(database_url, base)
    with serve_subprocess(env) as (a, proc_a), serve_subprocess(env) as (b, _):
        headers = {"X-Budget": f"max_seconds={KILLED_MAX_SECONDS:g}"}
        run_id = await _start(http, a, "text", headers=headers, pace=0.05)
        reader = SseReader()
        async with http.stream("GET", f"{b}/v1/runs/{run_id}/stream") as r:
            chunks = r.aiter_bytes()
            while len(reader.events) < 4:
                reader.feed(await anext(chunks))
            os.kill(proc_a.pid, signal.SIGKILL)
            await asyncio.to_thread(proc_a.wait, 10)
            # The driver died before the budget's time ran out: the run is open, and only
            # B's reaper can end it.
            run = await _run(http, b, run_id)
            assert not run["closed"], "the driver's replica ended the run before it was killed"
            async for data in chunks:
                reader.feed(data)
        events = [json.loads(text) for _, text in reader.events]
        last = events[-1]
        assert (last["type"], last["code"], last["message"]) == (
            "RUN_ERROR",
            "budget_exhausted",
            exhausted("max_seconds", KILLED_MAX_SECONDS),
        )
        run = await _run(http, b, run_id)
        assert (run["status"], run["error_code"]) == ("cancelled", "budget_exhausted")
        # Ended by its time, from the log's creation time, and within a lease after it.
        created = datetime.fromisoformat(run["created_at"])
        lasted = (datetime.fromisoformat(run["closed_at"]) - created).total_seconds()
        assert KILLED_MAX_SECONDS <= lasted <= KILLED_MAX_SECONDS + LEASE
        # What A stored before it died is all there, in order, before the RUN_ERROR.
        stored = (await http.get(f"{b}/v1/runs/{run_id}/events",
                                 params={"limit": 10_000})).json()["events"]  # fmt: skip
        assert [e["chunk"] for e in stored] == events
