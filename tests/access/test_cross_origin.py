"""Other sites' requests, as the service sees them: writes carrying a foreign `Origin`
are refused on every route before their body is read, and in open mode a `Host` that
is no loopback name (DNS rebinding) is refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.access.conftest import log_digest
from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

LISTED = "https://app.example.com"
EVENTS = {"events": [{"type": "CUSTOM", "name": "x", "value": 1}]}


@pytest.fixture(scope="module")
async def open_mode(database_url: str) -> AsyncIterator[Running]:
    settings = settings_for(database_url, cors_origins=LISTED, allowed_hosts="replay.internal")
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture(scope="module")
async def keyed_mode(database_url: str) -> AsyncIterator[Running]:
    async with serve_in_process(settings_for(database_url, api_keys="k-admin")) as running:
        yield running


async def _unchanged(database_url: str, requests: AsyncIterator[httpx.Response]) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        before = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
        async for _ in requests:
            pass
        after = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
    finally:
        await conn.close()
    assert after == before


async def test_write_from_a_foreign_origin_is_refused_on_every_route_and_changes_nothing(
    open_mode: Running, database_url: str
) -> None:
    port = open_mode.base_url.rsplit(":", 1)[1]
    foreign = ["https://evil.example", "null", f"http://127.0.0.1:{int(port) + 1}",
               f"https://127.0.0.1:{port}", "http://localhost:" + port]  # fmt: skip
    writes = [
        ("POST", "/v1/runs/guarded/events", {"json": EVENTS}),
        ("POST", "/v1/runs/guarded/events", {"content": b'{"events": []}'}),
        ("PUT", "/v1/runs/guarded", {"json": {}}),
        ("PUT", "/v1/stream/guarded", {"headers": {"Content-Type": "text/html"}}),
        (
            "POST",
            "/v1/stream/guarded",
            {"content": b"x", "headers": {"Content-Type": "text/plain"}},
        ),
        ("DELETE", "/v1/stream/guarded", {}),
        ("POST", "/v1/chat/demo", {"json": {"messages": []}}),
        ("POST", "/v1/tokens", {"json": {"thread_id": "t"}}),
        ("PATCH", "/v1/runs/guarded", {"json": {}}),
    ]
    answers: list[httpx.Response] = []

    async def send() -> AsyncIterator[httpx.Response]:
        async with httpx.AsyncClient(base_url=open_mode.base_url, timeout=30) as client:
            for origin in foreign:
                for method, path, options in writes:
                    headers = {**options.get("headers", {}), "Origin": origin}
                    extra = {k: v for k, v in options.items() if k != "headers"}
                    r = await client.request(method, path, headers=headers, **extra)
                    answers.append(r)
                    yield r

    await _unchanged(database_url, send())
    for r in answers:
        assert r.status_code == 403, (r.request.method, r.request.url, r.text)
        assert r.json()["error"]["code"] == "origin_refused"
        assert not [h for h in r.headers if h.startswith("access-control-")]


async def test_write_from_its_own_or_a_listed_origin_or_no_browser_is_let_through(
    open_mode: Running,
) -> None:
    own = open_mode.base_url
    async with httpx.AsyncClient(base_url=own, timeout=30) as client:
        for n, origin in enumerate([own, LISTED, None]):
            headers = {} if origin is None else {"Origin": origin}
            r = await client.post(f"/v1/runs/let-{n}/events", json=EVENTS, headers=headers)
            assert r.status_code == 200, (origin, r.text)
        # Reads are not writes: a foreign page's GET is answered (CORS keeps it from the page).
        r = await client.get("/v1/runs/let-0", headers={"Origin": "https://evil.example"})
        assert r.status_code == 200
        assert not [h for h in r.headers if h.startswith("access-control-")]


async def test_foreign_write_is_refused_before_its_body_is_read(open_mode: Running) -> None:
    # The body is announced and never sent: the answer comes anyway.
    host, port = open_mode.base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(
        b"POST /v1/runs/slow/events HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example"
        b"\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"
    )
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    writer.close()
    assert status.startswith(b"HTTP/1.1 403")


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io",
                                  "localhost.evil.example", "10.0.0.7:8000"])  # fmt: skip
async def test_request_naming_another_host_in_open_mode_is_refused(
    open_mode: Running, database_url: str, host: str
) -> None:
    answers: list[httpx.Response] = []

    async def send() -> AsyncIterator[httpx.Response]:
        async with httpx.AsyncClient(base_url=open_mode.base_url, timeout=30) as client:
            for method, path, options in [
                ("GET", "/v1/runs", {}),
                ("GET", "/v1/stream/let-0?offset=-1", {}),
                ("POST", "/v1/runs/rebound/events", {"json": EVENTS}),
                ("DELETE", "/v1/stream/let-0", {}),
                ("GET", "/inspect", {}),
            ]:
                r = await client.request(method, path, headers={"Host": host}, **options)
                answers.append(r)
                yield r

    await _unchanged(database_url, send())
    for r in answers:
        assert r.status_code == 403, (r.request.url, r.text)
        assert r.json()["error"]["code"] == "host_refused"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    name=st.sampled_from(["localhost", "127.0.0.1", "[::1]", "LOCALHOST", "replay.internal"]),
    port=st.one_of(st.none(), st.integers(1, 65535)),
)
async def test_request_naming_a_loopback_or_listed_host_is_answered(
    open_mode: Running, name: str, port: int | None
) -> None:
    host = name if port is None else f"{name}:{port}"
    async with httpx.AsyncClient(base_url=open_mode.base_url, timeout=30) as client:
        r = await client.get("/v1/runs", params={"limit": 1}, headers={"Host": host})
    assert r.status_code == 200, (host, r.text)


async def test_health_checks_and_keyed_mode_answer_any_host(
    open_mode: Running, keyed_mode: Running
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        for path in ("/healthz", "/readyz"):
            r = await client.get(open_mode.base_url + path, headers={"Host": "10.0.0.7:8000"})
            assert r.status_code == 200
        # With keys, a rebound page has no credential: the usual 401, not a Host refusal.
        r = await client.get(keyed_mode.base_url + "/v1/runs", headers={"Host": "evil.example"})
        assert r.status_code == 401
