"""`/v1/chat/{agent}` as TanStack AI's client uses it: start, resume, join, hydrate."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.agents.conftest import follow
from tests.stream.wire import NdjsonReader, SseReader

USER = {"id": "user-1", "role": "user", "content": "Is it cold in Oslo?"}


async def _sse(response: httpx.Response, reader: SseReader, at_least: int | None = None) -> None:
    async for data in response.aiter_bytes():
        reader.feed(data)
        if at_least is not None and len(reader.events) >= at_least:
            return


async def test_chat_post_then_run_started_and_streamed_to_its_terminal_event(
    http: httpx.AsyncClient,
) -> None:
    reader = SseReader()
    body = {"threadId": "th-chat-1", "runId": "ignored-by-header", "messages": [USER]}
    async with http.stream(
        "POST", "/v1/chat/demo", json=body, headers={"X-Run-Id": "chat-run-1"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        await _sse(response, reader)
    chunks = [json.loads(text) for _, text in reader.events]
    assert chunks[0]["name"] == "run.accepted" and chunks[-1]["type"] == "RUN_FINISHED"
    assert chunks[1]["runId"] == "chat-run-1" and chunks[1]["threadId"] == "th-chat-1"
    run = (await http.get("/v1/runs/chat-run-1")).json()
    assert run["thread_id"] == "th-chat-1" and run["agent"] == "demo"


async def test_chat_post_with_last_event_id_then_resumes_after_it_and_starts_nothing(
    http: httpx.AsyncClient,
) -> None:
    body = {"threadId": "th-chat-2", "messages": [USER]}
    headers = {"X-Run-Id": "chat-run-2"}
    async with http.stream("POST", "/v1/chat/demo", json=body, headers=headers) as response:
        first = SseReader()
        await _sse(response, first, at_least=5)
    resumed = SseReader()
    async with http.stream(
        "POST", "/v1/chat/demo", json=body, headers={**headers, "Last-Event-ID": "5"}
    ) as response:
        await _sse(response, resumed)
    assert resumed.events[0][0] == 6
    stored = await follow(http, "chat-run-2")
    assert [json.loads(t) for _, t in first.events[:5] + resumed.events] == stored
    assert [c["type"] for c in stored].count("RUN_STARTED") == 1


async def test_chat_get_join_then_from_first_event_and_header_wins_over_offset(
    http: httpx.AsyncClient,
) -> None:
    await http.post("/v1/agents/demo/runs", json={"runId": "chat-run-3", "threadId": "th-3"})
    stored = await follow(http, "chat-run-3")
    async with http.stream(
        "GET", "/v1/chat/demo", params={"offset": "-1", "runId": "chat-run-3"}
    ) as r:
        joined = SseReader()
        await _sse(r, joined)
    assert [json.loads(t) for _, t in joined.events] == stored
    async with http.stream(
        "GET",
        "/v1/chat/demo",
        params={"offset": "-1", "runId": "chat-run-3"},
        headers={"Last-Event-ID": str(len(stored) - 2)},
    ) as r:
        tail = SseReader()
        await _sse(r, tail)
    assert [seq for seq, _ in tail.events] == [len(stored) - 1, len(stored)]


async def test_chat_join_when_run_unknown_then_200_with_one_idless_run_error(
    http: httpx.AsyncClient,
) -> None:
    r = await http.get("/v1/chat/demo", params={"offset": "-1", "runId": "no-such-run"})
    assert r.status_code == 200
    lines = [line for line in r.text.split("\n") if line]
    assert len(lines) == 1 and lines[0].startswith("data: ")
    assert json.loads(lines[0][6:])["type"] == "RUN_ERROR"


async def test_chat_resume_when_run_finished_and_client_has_all_then_200_empty_not_204(
    http: httpx.AsyncClient,
) -> None:
    await http.post("/v1/agents/demo/runs", json={"runId": "chat-run-4", "threadId": "th-4"})
    stored = await follow(http, "chat-run-4")
    r = await http.post(
        "/v1/chat/demo",
        json={"threadId": "th-4"},
        headers={"X-Run-Id": "chat-run-4", "Last-Event-ID": str(len(stored))},
    )
    assert (r.status_code, r.content) == (200, b"")


async def test_chat_when_ndjson_format_then_durable_envelopes(http: httpx.AsyncClient) -> None:
    reader = NdjsonReader()
    async with http.stream(
        "POST",
        "/v1/chat/demo",
        params={"format": "ndjson"},
        json={"threadId": "th-5", "messages": [USER]},
        headers={"X-Run-Id": "chat-run-5"},
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        async for data in response.aiter_bytes():
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, len(reader.events) + 1))
    assert json.loads(reader.events[-1][1])["type"] == "RUN_FINISHED"


async def _hydrate(http: httpx.AsyncClient, thread: str, **params: Any) -> dict[str, Any]:
    r = await http.get(
        "/v1/chat/demo",
        params={"threadId": thread, **params},
        headers={"Accept": "application/json"},
    )
    assert r.status_code == 200, r.text
    document: dict[str, Any] = r.json()
    return document


async def test_hydration_when_thread_unknown_then_empty_document_200(
    http: httpx.AsyncClient,
) -> None:
    document = await _hydrate(http, "th-nobody")
    assert document["messages"] == [] and document["activeRun"] is None


async def test_hydration_when_runs_finished_then_user_and_assistant_turns_in_order(
    http: httpx.AsyncClient,
) -> None:
    second = {"id": "user-2", "role": "user", "content": "And tomorrow?"}
    for run, messages in (
        ("hyd-1", [USER]),
        ("hyd-2", [USER, {"id": "a", "role": "assistant", "content": "..."}, second]),
    ):
        await http.post(
            "/v1/agents/demo/runs", json={"runId": run, "threadId": "th-hyd", "messages": messages}
        )
        await follow(http, run)
    document = await _hydrate(http, "th-hyd")
    messages = document["messages"]
    assert document["activeRun"] is None
    assert (messages[0]["role"], messages[0]["id"]) == ("user", "user-1")
    users = [m for m in messages if m["role"] == "user"]
    assert [u["id"] for u in users] == ["user-1", "user-2"]
    assert all("parts" in m for m in messages)
    run_messages = (await http.get("/v1/runs/hyd-2/messages")).json()
    tail = messages[messages.index(users[1]) + 1 :]
    assert tail == (run_messages["messages"] if isinstance(run_messages, dict) else run_messages)
    page = await _hydrate(http, "th-hyd", limit=2)
    assert page["messages"] == messages[-2:] and page["page"]["truncated"] is True


async def test_hydration_when_run_active_then_its_user_turn_but_no_assistant_turn(
    http: httpx.AsyncClient,
) -> None:
    await http.post(
        "/v1/agents/slow/runs",
        json={"runId": "hyd-active", "threadId": "th-active", "messages": [USER]},
    )
    document = await _hydrate(http, "th-active")
    assert document["activeRun"] == {"runId": "hyd-active"}
    assert [m["role"] for m in document["messages"]] == ["user"]
    await http.post("/v1/runs/hyd-active/cancel", headers={"Content-Type": "application/json"})
