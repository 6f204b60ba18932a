"""Redaction against the real service and database: a secret split into any number of deltas,
by a hosted run's agent or in one pushed append (JSON or NDJSON), is in no stored row (read
by SQL), no stream encoding, no export and no transcript; clean text is stored as sent."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.agents import pyagents
from tests.agents.conftest import follow
from tests.conftest import settings_for
from tests.ingest.secrets import FILLER, escaped_json, secret, splits
from tests.support.servers import Running, serve_in_process

pytestmark = pytest.mark.asyncio


def _letters() -> str:
    """A unique id with no digit: a hex one may hold a run of digits that passes Luhn, which
    the `card` rule would then redact wherever the id is content (a run's input)."""
    return uuid.uuid4().hex.translate(_NO_DIGITS)


_NO_DIGITS = str.maketrans("0123456789", "ghijklmnop")


@pytest.fixture(scope="module")
async def redacting(database_url: str) -> AsyncIterator[Running]:
    agents = {
        "scripted": "python:tests.agents.pyagents:scripted",
        "gated": "python:tests.agents.pyagents:gated",
        "ticketed": {"url": "python:tests.agents.pyagents:scripted", "redact": ["t=T-[0-9]{6}"]},
    }
    settings = settings_for(
        database_url, agents=json.dumps(agents), redact="default", heartbeat_seconds=0.5
    )
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def http(redacting: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=redacting.base_url, timeout=30) as client:
        yield client


def _run_events(value: str, clean: str, data: st.DataObject, run_id: str) -> list[dict[str, Any]]:
    """A run whose message, tool call, result and state carry `value`, split anywhere and
    interleaved with a clean message."""
    args = escaped_json({"query": f"find {value} now", "n": 1}, data)
    m1 = [{"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"}]
    m1 += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": d}
           for d in splits(f"it is {value} ok", data)]  # fmt: skip
    m1 += [{"type": "TEXT_MESSAGE_END", "messageId": "m1"}]
    t1 = [{"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "search",
           "parentMessageId": "m1"}]  # fmt: skip
    t1 += [{"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": d} for d in splits(args, data)]
    t1 += [{"type": "TOOL_CALL_END", "toolCallId": "t1"},
           {"type": "TOOL_CALL_RESULT", "messageId": "r1", "toolCallId": "t1",
            "content": f"got {value}"}]  # fmt: skip
    m2 = [{"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"}]
    m2 += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": d}
           for d in splits(clean, data, 10) if d]  # fmt: skip
    m2 += [{"type": "TEXT_MESSAGE_END", "messageId": "m2"}]
    # m1 interleaved into the tool call's events at drawn places, each in its own order.
    places = sorted(
        data.draw(st.lists(st.integers(0, len(t1)), min_size=len(m1), max_size=len(m1)))
    )
    order = [*t1]
    for shift, (place, event) in enumerate(zip(places, m1, strict=True)):
        order.insert(place + shift, event)
    return [
        {"type": "RUN_STARTED", "threadId": f"th-{run_id}", "runId": run_id},
        *order,
        *m2,
        {"type": "STATE_SNAPSHOT", "snapshot": {"memo": value}},
        {"type": "RUN_FINISHED", "threadId": f"th-{run_id}", "runId": run_id},
    ]


async def _everything_served(http: httpx.AsyncClient, run_id: str, thread_id: str) -> str:
    """Every encoding and rendering of the run the service serves, concatenated."""
    bodies = []
    for path, params in [
        (f"/v1/runs/{run_id}/stream", {}),
        (f"/v1/runs/{run_id}/stream", {"view": "decoded"}),
        (f"/v1/runs/{run_id}/stream", {"compact": "snapshot"}),
        (f"/v1/runs/{run_id}", {}),
        (f"/v1/runs/{run_id}/messages", {}),
        (f"/v1/runs/{run_id}/export", {}),
        (f"/v1/runs/{run_id}/transcript", {}),
        (f"/v1/runs/{run_id}/transcript", {"format": "html"}),
        (f"/v1/threads/{thread_id}/messages", {}),
        ("/v1/runs", {"thread_id": thread_id}),
    ]:
        answer = await http.get(path, params=params)
        assert answer.status_code == 200, (path, answer.text)
        bodies.append(answer.text)
    agui = await http.post(
        "/v1/agents/scripted/ag-ui",
        params={"compact": "snapshot"},
        json={"threadId": thread_id, "runId": run_id},
        headers={"Accept": "text/event-stream"},
    )
    assert agui.status_code == 200, agui.text
    bodies.append(agui.text)
    return "\n".join(bodies)


async def _stored(database_url: str, run_id: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        rows = await conn.fetch("SELECT chunk FROM events WHERE run_id = $1 ORDER BY seq", run_id)
        run = await conn.fetchval("SELECT input::text FROM runs WHERE run_id = $1", run_id)
    finally:
        await conn.close()
    assert rows
    return "\n".join([*(r["chunk"] for r in rows), run or ""])


def _no_trace(text: str, value: str) -> None:
    assert value not in text
    # Nor in any JSON string the text holds, however escaped.
    for line in text.splitlines():
        try:
            decoded = json.loads(line)
        except ValueError:
            continue
        assert value not in json.dumps(decoded, ensure_ascii=False)


def _message_text(events: list[dict[str, Any]], message_id: str) -> str:
    return "".join(
        e["delta"] for e in events
        if e["type"] == "TEXT_MESSAGE_CONTENT" and e["messageId"] == message_id
    )  # fmt: skip


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(secret(), FILLER, st.sampled_from(["hosted", "json", "ndjson"]), st.data())
async def test_a_split_secret_reaches_no_row_stream_export_or_transcript(
    http: httpx.AsyncClient,
    database_url: str,
    found: tuple[str, str],
    clean: str,
    path: str,
    data: st.DataObject,
) -> None:
    rule, value = found
    run_id = f"r-{_letters()}"
    events = _run_events(value, clean, data, run_id)
    if path == "hosted":
        started = await http.post(
            "/v1/agents/scripted/runs",
            json={"runId": run_id, "threadId": f"th-{run_id}", "forwardedProps": {"events": events},
                  "messages": [{"id": "u1", "role": "user", "content": f"use {value}"}]},
        )  # fmt: skip
        assert started.status_code == 201, started.text
    elif path == "json":
        appended = await http.post(f"/v1/runs/{run_id}/events", json={"events": events})
        assert appended.status_code == 200, appended.text
    else:
        body = "\n".join(json.dumps(e) for e in events)
        appended = await http.post(
            f"/v1/runs/{run_id}/events",
            content=body,
            headers={"Content-Type": "application/x-ndjson"},
        )
        assert appended.status_code == 200, appended.text
    if path != "hosted":
        closed = await http.post(f"/v1/runs/{run_id}/close", json={})
        assert closed.status_code == 200, closed.text
    streamed = await follow(http, run_id)

    _no_trace(await _stored(database_url, run_id), value)
    _no_trace(await _everything_served(http, run_id, f"th-{run_id}"), value)
    assert _message_text(streamed, "m1") == f"it is [REDACTED:{rule}] ok"
    assert _message_text(streamed, "m2") == clean  # byte for byte
    args = "".join(e["delta"] for e in streamed if e["type"] == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"query": f"find [REDACTED:{rule}] now", "n": 1}
    assert all(e.get("delta") != "" for e in streamed)
    # Counted per rule on the run (m1, the arguments, the result, the state; a hosted run's
    # input too: the user's message and the script it carries), listed as redacted.
    record = (await http.get(f"/v1/runs/{run_id}")).json()
    if path == "hosted":  # the script's deltas are strings of the input: matched each alone
        assert record["redactions"][rule] >= 5
    else:
        assert record["redactions"] == {rule: 4}
    listed = await http.get("/v1/runs", params={"thread_id": f"th-{run_id}", "redacted": "true"})
    assert [r["run_id"] for r in listed.json()["runs"]] == [run_id]
    assert listed.json()["runs"][0]["redactions"] == record["redactions"]


async def test_a_run_adds_rules_to_its_agents_and_the_services(http: httpx.AsyncClient) -> None:
    run_id = f"r-{_letters()}"
    said = "ticket T-123456, order O-98765, mail a@b.io!"
    events = [
        {"type": "RUN_STARTED", "threadId": "th", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": c} for c in said),
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": "th", "runId": run_id},
    ]
    started = await http.post(
        "/v1/agents/ticketed/runs",
        json={"runId": run_id, "forwardedProps": {"events": events}, "redact": ["o=O-[0-9]{5}"]},
    )
    assert started.status_code == 201, started.text
    streamed = await follow(http, run_id)
    assert _message_text(streamed, "m") == (
        "ticket [REDACTED:t], order [REDACTED:o], mail [REDACTED:email]!"
    )
    metrics = (await http.get("/metrics")).text
    assert 'replay_redactions_total{rule="o"}' in metrics


async def test_a_hosted_runs_matches_are_on_its_record_once_metrics_count_them(
    http: httpx.AsyncClient,
) -> None:
    run_id = f"r-{_letters()}"
    events = [
        {"type": "RUN_STARTED", "threadId": "th", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "code G-123456 ok"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
    ]
    started = await http.post(
        "/v1/agents/gated/runs",
        json={"runId": run_id, "threadId": "th", "forwardedProps": {"events": events},
              "redact": ["gate=G-[0-9]{6}"]},
    )  # fmt: skip
    assert started.status_code == 201, started.text
    counted = re.compile(r'^replay_redactions_total\{rule="gate"\} (\S+)$', re.M)
    deadline = time.monotonic() + 30
    while True:
        found = counted.search((await http.get("/metrics")).text)
        if found and float(found.group(1)) >= 2:  # the run's input and its message
            break
        assert time.monotonic() < deadline, "the match was never counted in /metrics"
        await asyncio.sleep(0.02)
    # /metrics counts a match once its append committed, with the run's count in it: the
    # run, still running (its agent waits), has it already.
    record = (await http.get(f"/v1/runs/{run_id}")).json()
    assert record["closed"] is False
    assert record["redactions"] == {"gate": 2}
    pyagents.GATES.setdefault(run_id, asyncio.Event()).set()
    streamed = await follow(http, run_id)
    assert _message_text(streamed, "m") == "code [REDACTED:gate] ok"
    assert (await http.get(f"/v1/runs/{run_id}")).json()["redactions"] == {"gate": 2}


@pytest.mark.parametrize(
    "redact",
    [["nope"], ["x=[0-9]+"], ["x=(?:a{1,3}){1,3}"], {"email": 1}, ["email=abc"], [""]],
)
async def test_a_malformed_rule_is_a_422_and_starts_nothing(
    http: httpx.AsyncClient, redact: Any
) -> None:
    run_id = f"r-{_letters()}"
    answer = await http.post(
        "/v1/agents/scripted/runs",
        json={"runId": run_id, "forwardedProps": {"events": []}, "redact": redact},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "invalid_redaction"
    assert (await http.get(f"/v1/runs/{run_id}")).status_code == 404
