"""`?token=` carries signed tokens only (for EventSource, which cannot send headers): an API
key there, the admin key included, is refused with its own code, whatever else the request
carries, and does nothing; a token there works as before."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from tests.access.conftest import ADMIN, log_digest, mint
from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[Running]:
    settings = settings_for(
        database_url, api_keys="k-admin, k-append:append", demo_delay_seconds=0.0,
        token_secret="query-token-secret-0123456789abcdef-0123456789",
    )  # fmt: skip
    async with serve_in_process(settings) as running:
        async with httpx.AsyncClient(base_url=running.base_url) as client:
            r = await client.post(
                "/v1/runs/q-1/events", headers={**ADMIN, **JSON_TYPE},
                json={"events": [{"type": "RUN_STARTED", "threadId": "t-q", "runId": "q-1"}]},
            )  # fmt: skip
            assert r.status_code == 200, r.text
        yield running


# (method, path, extra request options): admin reads and writes, the hot append, a stream.
KEY_IN_QUERY = [
    ("GET", "/v1/runs?token=k-admin", {}),
    ("GET", "/v1/runs/q-1/stream?offset=-1&token=k-admin", {}),
    ("POST", "/v1/tokens?token=k-admin", {"json": {"thread_id": "t-q"}}),
    ("POST", "/v1/runs/q-1/events?token=k-append", {"json": {"events": [{"type": "A"}]}}),
    ("POST", "/v1/runs/q-1/close?token=k-admin", {"headers": JSON_TYPE}),
    ("GET", "/v1/stream/q-1?offset=-1&token=k-admin", {}),
    # Beside a header credential (which would otherwise win): the key is still refused.
    ("GET", "/v1/runs?token=k-admin", {"headers": {"Authorization": "Bearer k-append"}}),
]


@pytest.mark.parametrize(
    ("method", "path", "options"), KEY_IN_QUERY, ids=[f"{m} {p}" for m, p, _ in KEY_IN_QUERY]
)
async def test_api_key_in_the_query_is_401_key_in_query_and_does_nothing(
    keyed: Running, database_url: str, method: str, path: str, options: dict[str, object]
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        before = await log_digest(conn)
        async with httpx.AsyncClient(base_url=keyed.base_url, timeout=30) as client:
            r = await client.request(method, path, **options)  # type: ignore[arg-type]
        assert r.status_code == 401, r.text
        error = r.json()["error"]
        assert error["code"] == "key_in_query" and "Authorization" in error["message"], error
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert await log_digest(conn) == before
    finally:
        await conn.close()


async def test_signed_token_in_the_query_still_reads_its_thread(keyed: Running) -> None:
    async with httpx.AsyncClient(base_url=keyed.base_url, timeout=30) as client:
        token = await mint(client, thread_id="t-q")
        r = await client.get("/v1/runs", params={"thread_id": "t-q", "token": token})
        assert r.status_code == 200 and r.json()["runs"][0]["run_id"] == "q-1", r.text
        r = await client.get("/v1/runs/q-1/events", params={"token": token})
        assert r.status_code == 200, r.text
