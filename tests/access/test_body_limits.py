"""Bodies are bounded before they are read, and only for a known credential: an
unauthenticated caller cannot make the server read (or hold) a byte of its body, and an
authenticated one cannot send more than its route's limit. Over the socket by hand
(tests/access/wire.py): a server that waited for the declared body would never answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import fastapi.routing
import httpx
import pytest
from fastapi.routing import APIRoute

from agent_replay.api.app import create_app
from agent_replay.api.auth import rule_of
from agent_replay.api.bodies import GuardedRoute
from agent_replay.config import Settings
from tests.access.conftest import ADMIN, bearer, log_digest, mint, wait_hosted_closed
from tests.access.wire import chunked_until_answered, declared_not_sent
from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

KEYS = "k-admin, k-append:append, k-run:run"
SECRET = "limits-token-secret-0123456789abcdef-0123456789"
JSON_LIMIT = 64 << 10
BATCH_LIMIT = 256 << 10
METADATA_LIMIT = 4 << 10
JSON_TYPE = {"Content-Type": "application/json"}
HUGE = 100 << 20
ASK = {"messages": [{"id": "u-1", "role": "user", "content": "hi"}]}

# (method, path, the limit that applies): one of each kind of route that takes a body.
ROUTES = [
    ("POST", "/v1/chat/demo", JSON_LIMIT),
    ("POST", "/v1/ai-sdk/demo", JSON_LIMIT),
    ("POST", "/v1/agents/demo/ag-ui", JSON_LIMIT),
    ("POST", "/v1/agents/demo/runs", JSON_LIMIT),
    ("PUT", "/v1/runs/lim-1", JSON_LIMIT),
    ("POST", "/v1/runs/lim-1/fork", JSON_LIMIT),
    ("POST", "/v1/tokens", JSON_LIMIT),
    ("POST", "/v1/runs/lim-1/events", BATCH_LIMIT),
    ("PUT", "/v1/stream/lim-ds", BATCH_LIMIT),
]
IDS = [f"{m} {p}" for m, p, _ in ROUTES]


@pytest.fixture(scope="module")
async def limited(database_url: str) -> AsyncIterator[Running]:
    settings = settings_for(
        database_url,
        api_keys=KEYS,
        token_secret=SECRET,
        demo_delay_seconds=0.0,
        max_body_bytes=JSON_LIMIT,
        max_batch_bytes=BATCH_LIMIT,
        max_metadata_bytes=METADATA_LIMIT,
    )
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def db(database_url: str) -> AsyncIterator[asyncpg.Connection]:
    conn = await asyncpg.connect(database_url)
    yield conn
    await conn.close()


@pytest.mark.parametrize(("method", "path", "limit"), ROUTES, ids=IDS)
@pytest.mark.parametrize("credential", ["none", "unknown"])
async def test_huge_body_without_a_known_credential_is_401_before_the_body_is_read(
    limited: Running, method: str, path: str, limit: int, credential: str
) -> None:
    headers = {**JSON_TYPE, **({} if credential == "none" else bearer("k-nobody"))}
    answer = await declared_not_sent(limited.base_url, method, path, HUGE, headers)
    assert answer.status == 401 and answer.error_code() == "unauthorized", answer


@pytest.mark.parametrize(("method", "path", "limit"), ROUTES, ids=IDS)
async def test_declared_body_over_the_route_limit_is_413_before_the_body_is_read(
    limited: Running, method: str, path: str, limit: int
) -> None:
    answer = await declared_not_sent(
        limited.base_url, method, path, limit + 1, {**JSON_TYPE, **ADMIN}
    )
    assert answer.status == 413 and answer.error_code() == "payload_too_large", answer


@pytest.mark.parametrize(("method", "path", "limit"), ROUTES, ids=IDS)
async def test_chunked_body_over_the_route_limit_is_cut_at_the_limit_and_nothing_stored(
    limited: Running, db: asyncpg.Connection, method: str, path: str, limit: int
) -> None:
    await wait_hosted_closed(db)
    before = await log_digest(db)
    answer, sent = await chunked_until_answered(
        limited.base_url, method, path, {**JSON_TYPE, **ADMIN},
        b'{"threadId": "lim", "metadata": {"a": "', most=HUGE,
    )  # fmt: skip
    assert answer.status == 413 and answer.error_code() == "payload_too_large", answer
    # Cut as it streamed: answered long before the sender's last byte, more than any
    # socket buffer holds.
    assert sent < HUGE
    await wait_hosted_closed(db)
    assert await log_digest(db) == before


async def test_chat_token_run_input_over_the_json_limit_is_413_and_nothing_started(
    limited: Running, db: asyncpg.Connection
) -> None:
    async with httpx.AsyncClient(base_url=limited.base_url, timeout=30) as client:
        token = await mint(client, thread_id="th-big", scopes=["read", "chat"])
        await wait_hosted_closed(db)
        before = await log_digest(db)
        turn = {"id": "u", "role": "user", "content": "x" * (2 * JSON_LIMIT)}
        big = {"threadId": "th-big", "messages": [turn]}
        r = await client.post("/v1/chat/demo", json=big, headers=bearer(token))
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
    await wait_hosted_closed(db)
    assert await log_digest(db) == before


async def test_run_metadata_over_its_limit_is_413_and_no_run_created(
    limited: Running, db: asyncpg.Connection
) -> None:
    body = {"thread_id": "th-meta", "metadata": {"blob": "m" * (2 * METADATA_LIMIT)}}
    before = await log_digest(db)
    async with httpx.AsyncClient(base_url=limited.base_url, timeout=30) as client:
        r = await client.put("/v1/runs/meta-big", json=body, headers=bearer("k-append"))
        small = await client.put(
            "/v1/runs/meta-small", json={"metadata": {"a": 1}}, headers=bearer("k-append")
        )
    assert r.status_code == 413 and r.json()["error"]["code"] == "payload_too_large", r.text
    assert small.status_code == 201, small.text
    assert await db.fetchval("SELECT count(*) FROM runs WHERE run_id = 'meta-big'") == 0
    assert before != await log_digest(db)  # the small one only


def test_every_route_with_a_rule_or_a_body_is_guarded_or_guards_itself() -> None:
    """The guard is what checks the credential before the body and parses it once: a route
    left out of it would read bodies unbounded, before the 401, with FastAPI's own parser."""
    app = create_app(Settings(database_url="postgresql://unused@127.0.0.1:1/x"))
    # The two plain Starlette routes bound, type and authorize their bodies themselves.
    own = {"/v1/runs/{run_id}/events", "/v1/stream/{name:path}"}
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    for route in flatten(app.routes) if flatten else app.routes:
        path = getattr(route, "path", None)
        original = getattr(route, "original_route", route)
        if path in own or not isinstance(original, APIRoute):
            continue
        if rule_of(original) is not None or original.body_field is not None:
            assert isinstance(original, GuardedRoute), path
