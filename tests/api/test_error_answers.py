"""One answer per condition, on every endpoint that can meet it (the README's error-code
list), and a refused request writes nothing: each test compares the whole database
before and after."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import httpx
import pytest

from tests.stream.wire import SseReader

USER = {"id": "u-1", "role": "user", "content": "Is it cold?"}


async def _fingerprint(database_url: str) -> Any:
    conn = await asyncpg.connect(database_url)
    try:
        return await conn.fetchrow(
            "SELECT (SELECT count(*) FROM runs) AS runs, (SELECT count(*) FROM events) AS events,"
            " (SELECT max(updated_at) FROM runs) AS touched,"
            " (SELECT coalesce(sum(last_seq), 0) FROM runs) AS seqs"
        )
    finally:
        await conn.close()


@asynccontextmanager
async def nothing_written(database_url: str) -> AsyncIterator[None]:
    before = await _fingerprint(database_url)
    yield
    assert await _fingerprint(database_url) == before


def _error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body: dict[str, Any] = r.json()["error"]
    assert body["code"] == code and body["message"], body
    return body


async def _finished(client: httpx.AsyncClient, path: str, body: Any, run_id: str) -> list[Any]:
    reader = SseReader()
    async with client.stream("POST", path, json=body, headers={"X-Run-Id": run_id}) as r:
        assert r.status_code == 200, await r.aread()
        async for data in r.aiter_bytes():
            reader.feed(data)
    return [json.loads(text) for _, text in reader.events]


BAD_JSON_ROUTES = [
    ("POST", "/v1/chat/demo"),
    ("POST", "/v1/agents/demo/runs"),
    ("POST", "/v1/agents/demo/ag-ui"),
    ("POST", "/v1/ai-sdk/demo"),
    ("PUT", "/v1/runs/bad-json-1"),
    ("POST", "/v1/runs/bad-json-1/events"),
]


@pytest.mark.parametrize(("method", "path"), BAD_JSON_ROUTES)
async def test_body_when_not_valid_json_then_400_invalid_json(
    client: httpx.AsyncClient, database_url: str, method: str, path: str
) -> None:
    async with nothing_written(database_url):
        r = await client.request(
            method,
            path,
            content=b'{"threadId": "t", ',
            headers={"Content-Type": "application/json", "X-Run-Id": "bad-json-1"},
        )
        _error(r, 400, "invalid_json")


BAD_ID = "has space"
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.mark.parametrize(
    ("method", "path", "kwargs"),
    [
        ("POST", "/v1/chat/demo", {"json": {"messages": [USER]}, "headers": {"X-Run-Id": BAD_ID}}),
        ("POST", "/v1/chat/demo", {"json": {"messages": [USER]}, "headers": {"X-Run-Id": ""}}),
        ("POST", "/v1/chat/demo", {"json": {"runId": BAD_ID, "messages": [USER]}}),
        ("POST", "/v1/agents/demo/runs", {"json": {"runId": BAD_ID}}),
        ("POST", "/v1/agents/demo/ag-ui", {"json": {"runId": BAD_ID}}),
        ("GET", "/v1/chat/demo", {"params": {"runId": BAD_ID, "offset": "-1"}}),
        ("PUT", f"/v1/runs/{BAD_ID}", {"headers": JSON_TYPE}),
        ("POST", f"/v1/runs/{BAD_ID}/events", {"json": {"events": [{"type": "X"}]}}),
        ("POST", f"/v1/runs/{BAD_ID}/close", {"headers": JSON_TYPE}),
        ("POST", f"/v1/runs/{BAD_ID}/cancel", {"headers": JSON_TYPE}),
        ("GET", f"/v1/runs/{BAD_ID}", {}),
        ("GET", f"/v1/runs/{BAD_ID}/events", {}),
        ("GET", f"/v1/runs/{BAD_ID}/stream", {}),
        ("GET", f"/v1/runs/{BAD_ID}/messages", {}),
        ("GET", f"/v1/runs/{BAD_ID}/export", {}),
    ],
    ids=lambda v: v if isinstance(v, str) else json.dumps(v, sort_keys=True)[:40],
)
async def test_run_id_when_malformed_wherever_it_comes_from_then_422_invalid_run_id(
    client: httpx.AsyncClient, database_url: str, method: str, path: str, kwargs: dict[str, Any]
) -> None:
    async with nothing_written(database_url):
        _error(await client.request(method, path, **kwargs), 422, "invalid_run_id")


@pytest.mark.parametrize("media", ["text/plain", "application/x-www-form-urlencoded", "text/csv"])
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/runs/media-1/events", {"events": [{"type": "RUN_STARTED"}]}),
        ("PUT", "/v1/runs/media-2", {"thread_id": "t"}),
        ("POST", "/v1/agents/demo/runs", {"runId": "media-3"}),
        ("POST", "/v1/chat/demo", {"runId": "media-4", "messages": [USER]}),
        ("POST", "/v1/agents/demo/ag-ui", {"runId": "media-5", "messages": [USER]}),
        ("POST", "/v1/ai-sdk/demo", {"id": "media-6", "messages": []}),
    ],
)
async def test_body_when_content_type_not_json_then_415_unsupported_media_type(
    client: httpx.AsyncClient, database_url: str, method: str, path: str, body: Any, media: str
) -> None:
    async with nothing_written(database_url):
        r = await client.request(
            method, path, content=json.dumps(body), headers={"Content-Type": media}
        )
        assert media in _error(r, 415, "unsupported_media_type")["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [("GET", "/nope"), ("GET", "/v1/nope"), ("POST", "/v1/runs/r/nope"), ("GET", "/v2/runs")],
)
async def test_route_when_unknown_then_404_not_found_in_the_error_shape(
    client: httpx.AsyncClient, database_url: str, method: str, path: str
) -> None:
    async with nothing_written(database_url):
        body = _error(await client.request(method, path), 404, "not_found")
        assert path in body["message"]


async def test_method_when_route_has_no_such_method_then_405_method_not_allowed(
    client: httpx.AsyncClient, database_url: str
) -> None:
    async with nothing_written(database_url):
        r = await client.delete("/v1/runs/some-run")
        _error(r, 405, "method_not_allowed")
        assert r.headers["allow"] == "GET, PUT"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"json": {"events": []}},
        {"json": {"events": [], "close": True}},
        {"content": b"", "headers": {"Content-Type": "application/x-ndjson"}},
    ],
    ids=["json", "json-close", "ndjson"],
)
async def test_append_when_empty_and_run_unknown_then_404_run_not_found_and_no_run(
    client: httpx.AsyncClient, database_url: str, kwargs: dict[str, Any]
) -> None:
    async with nothing_written(database_url):
        _error(await client.post("/v1/runs/empty-1/events", **kwargs), 404, "run_not_found")
    _error(await client.get("/v1/runs/empty-1"), 404, "run_not_found")


async def test_append_when_empty_and_run_exists_then_200_and_nothing_added(
    client: httpx.AsyncClient, database_url: str
) -> None:
    first = await client.post("/v1/runs/empty-2/events", json={"events": [{"type": "RUN_STARTED"}]})
    assert first.json()["last_seq"] == 1
    r = await client.post("/v1/runs/empty-2/events", json={"events": []})
    assert r.status_code == 200 and r.json()["last_seq"] == 1
    assert len((await client.get("/v1/runs/empty-2/events")).json()["events"]) == 1


async def test_chat_post_when_run_id_exists_with_another_request_then_409_run_conflict(
    client: httpx.AsyncClient, database_url: str
) -> None:
    body = {"threadId": "th-conflict", "messages": [USER]}
    await _finished(client, "/v1/chat/demo", body, "conflict-1")
    other = {"threadId": "th-conflict", "messages": [{**USER, "content": "Is it warm?"}]}
    async with nothing_written(database_url):
        r = await client.post("/v1/chat/demo", json=other, headers={"X-Run-Id": "conflict-1"})
        _error(r, 409, "run_conflict")
        r = await client.post("/v1/agents/demo/runs", json={**other, "runId": "conflict-1"})
        _error(r, 409, "run_conflict")
        r = await client.post(
            "/v1/chat/demo",
            json={**body, "threadId": "th-elsewhere"},
            headers={"X-Run-Id": "conflict-1"},
        )
        _error(r, 409, "run_conflict")


async def test_chat_post_when_run_id_names_a_run_not_of_this_agent_then_409_run_conflict(
    client: httpx.AsyncClient, database_url: str
) -> None:
    assert (await client.put("/v1/runs/conflict-2", json={})).status_code == 201
    async with nothing_written(database_url):
        r = await client.post(
            "/v1/chat/demo", json={"messages": []}, headers={"X-Run-Id": "conflict-2"}
        )
        _error(r, 409, "run_conflict")


async def test_chat_post_when_same_request_again_then_joins_the_run_from_its_start(
    client: httpx.AsyncClient, database_url: str
) -> None:
    body = {"threadId": "th-again", "messages": [USER]}
    first = await _finished(client, "/v1/chat/demo", body, "again-1")
    async with nothing_written(database_url):
        again = await _finished(client, "/v1/chat/demo", body, "again-1")
        # Leaving the thread out means the run's own thread: still the same request.
        without_thread = await _finished(client, "/v1/chat/demo", {"messages": [USER]}, "again-1")
    assert again == first == without_thread
    assert [c["type"] for c in first].count("RUN_STARTED") == 1
