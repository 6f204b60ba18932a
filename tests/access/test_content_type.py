"""A state-changing request must say it is JSON (or NDJSON where the route takes it), body
or not: the kinds a browser page on another origin can send without a CORS preflight
(`fetch(url, {method: "POST", mode: "no-cors"})`, a form) are 415, and change nothing.
In the open mode, where nothing else stands in such a page's way."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from tests.access.conftest import log_digest, wait_hosted_closed

# What a cross-site page can send without a preflight: no type, and the three CORS-safelisted.
SIMPLE_TYPES = [
    None,
    "text/plain",
    "text/plain;charset=UTF-8",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
]
APPEND = b'{"events": [{"type": "RUN_STARTED", "threadId": "t-ct", "runId": "ct-1"}]}'
ASK = b'{"threadId": "t-ct", "messages": [{"id": "u", "role": "user", "content": "hi"}]}'

# (method, path, body): the append route, close and cancel (no body), and the other writes.
WRITES = [
    ("POST", "/v1/runs/ct-1/events", APPEND),
    ("POST", "/v1/runs/ct-1/close", b""),
    ("POST", "/v1/runs/ct-h/cancel", b""),
    ("PUT", "/v1/runs/ct-new", b""),
    ("PUT", "/v1/runs/ct-new", b'{"thread_id": "t-x"}'),
    ("POST", "/v1/runs/ct-1/fork", b'{"run_id": "ct-fork"}'),
    ("POST", "/v1/agents/demo/runs", ASK),
    ("POST", "/v1/chat/demo", ASK),
    ("POST", "/v1/agents/demo/ag-ui", ASK),
    ("POST", "/v1/ai-sdk/demo", b'{"id": "t-ct", "messages": []}'),
]


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest.fixture
async def runs(client: httpx.AsyncClient, db: asyncpg.Connection) -> None:
    """An open run (ct-1) and a hosted run (ct-h), made with the right type, once."""
    if (await client.get("/v1/runs/ct-1")).status_code == 404:
        r = await client.post("/v1/runs/ct-1/events", content=APPEND, headers={
            "Content-Type": "application/json"})  # fmt: skip
        assert r.status_code == 200, r.text
    r = await client.post("/v1/agents/demo/runs", json={"runId": "ct-h", "threadId": "t-ct"})
    assert r.status_code in (200, 201), r.text
    await wait_hosted_closed(db)


@pytest.mark.parametrize("media", SIMPLE_TYPES, ids=[str(m) for m in SIMPLE_TYPES])
@pytest.mark.parametrize(("method", "path", "body"), WRITES, ids=[f"{m} {p}" for m, p, _ in WRITES])
async def test_write_without_a_json_type_is_415_and_changes_nothing(
    client: httpx.AsyncClient,
    db: asyncpg.Connection,
    runs: None,
    media: str | None,
    method: str,
    path: str,
    body: bytes,
) -> None:
    before = await log_digest(db)
    headers = {} if media is None else {"Content-Type": media}
    r = await client.request(method, path, content=body, headers=headers)
    assert r.status_code == 415, r.text
    assert r.json()["error"]["code"] == "unsupported_media_type" and r.json()["error"]["message"]
    await wait_hosted_closed(db)
    assert await log_digest(db) == before


async def test_close_and_cancel_with_a_json_type_and_no_body_still_work(
    client: httpx.AsyncClient, runs: None
) -> None:
    json_type = {"Content-Type": "application/json"}
    r = await client.post("/v1/runs/ct-1/close", headers=json_type)
    assert r.status_code == 200 and r.json()["closed_at"], r.text
    r = await client.post("/v1/runs/ct-h/cancel", headers=json_type)
    assert r.status_code == 200, r.text
    ndjson = {"Content-Type": "application/x-ndjson"}
    r = await client.post("/v1/runs/ct-2/events", content=b'{"type":"A"}\n', headers=ndjson)
    assert r.status_code == 200, r.text
