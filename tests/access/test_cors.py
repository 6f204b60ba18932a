"""CORS: listed origins get preflights and readable answers (errors too); others
nothing; and with no origins configured there is no CORS header at all."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.servers import serve_in_process

LISTED = "https://chat.example.com"
PREFLIGHT = {
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type, last-event-id, x-run-id",
}


@pytest.fixture(scope="module")
async def cors(database_url: str) -> AsyncIterator[str]:
    settings = settings_for(
        database_url, api_keys="k-admin", cors_origins=f"{LISTED}, https://other.example.org"
    )
    async with serve_in_process(settings) as running:
        yield running.base_url


@pytest.fixture(scope="module")
async def no_cors(database_url: str) -> AsyncIterator[str]:
    async with serve_in_process(settings_for(database_url, api_keys="k-admin")) as running:
        yield running.base_url


async def test_preflight_when_origin_listed_then_204_allowing_the_client_headers(cors: str) -> None:
    async with httpx.AsyncClient(base_url=cors) as client:
        r = await client.options("/v1/chat/demo", headers={"Origin": LISTED, **PREFLIGHT})
    assert r.status_code == 204
    assert r.headers["access-control-allow-origin"] == LISTED
    assert "Origin" in r.headers["vary"]
    allowed = {h.strip().lower() for h in r.headers["access-control-allow-headers"].split(",")}
    assert {"authorization", "content-type", "last-event-id", "x-run-id"} <= allowed
    # A page starting a hosted run may set its budget and disconnect policy.
    assert {"x-budget", "x-on-disconnect"} <= allowed
    assert "POST" in r.headers["access-control-allow-methods"]
    assert "access-control-allow-credentials" not in r.headers


async def test_preflight_when_origin_unlisted_then_403_without_cors_headers(cors: str) -> None:
    async with httpx.AsyncClient(base_url=cors) as client:
        r = await client.options(
            "/v1/chat/demo", headers={"Origin": "https://evil.example.net", **PREFLIGHT}
        )
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    assert not [h for h in r.headers if h.startswith("access-control-")]


async def test_request_when_origin_listed_then_answers_and_errors_readable(cors: str) -> None:
    async with httpx.AsyncClient(base_url=cors) as client:
        refused = await client.get("/v1/runs", headers={"Origin": LISTED})
        ok = await client.get(
            "/v1/runs", headers={"Origin": LISTED, "Authorization": "Bearer k-admin"}
        )
        other = await client.get("/v1/runs", headers={"Origin": "https://evil.example.net"})
    for r in (refused, ok):
        assert r.headers["access-control-allow-origin"] == LISTED
        exposed = r.headers["access-control-expose-headers"].lower()
        assert "www-authenticate" in exposed
    assert refused.status_code == 401 and ok.status_code == 200
    # Not listed: answered as ever, but nothing lets a browser page read it.
    assert other.status_code == 401
    assert not [h for h in other.headers if h.startswith("access-control-")]


async def test_cors_when_no_origins_configured_then_no_cors_headers_at_all(no_cors: str) -> None:
    async with httpx.AsyncClient(base_url=no_cors) as client:
        preflight = await client.options("/v1/chat/demo", headers={"Origin": LISTED, **PREFLIGHT})
        plain = await client.get("/v1/runs", headers={"Origin": LISTED})
    for r in (preflight, plain):
        assert not [h for h in r.headers if h.startswith("access-control-")], r.headers
    assert preflight.status_code == 405 and plain.status_code == 401


async def test_durable_stream_cors_follows_the_listed_origins_with_the_protocols_headers(
    cors: str, no_cors: str
) -> None:
    # Durable Streams is no exception: its answers are readable by listed origins only,
    # whose preflights allow the protocol's request headers and expose its answer headers.
    ds_preflight = {
        "Access-Control-Request-Method": "PUT",
        "Access-Control-Request-Headers": "if-none-match, stream-seq, producer-id",
    }
    async with httpx.AsyncClient() as client:
        listed = await client.options(
            f"{cors}/v1/stream/cors-check", headers={"Origin": LISTED, **ds_preflight}
        )
        unlisted = await client.options(
            f"{cors}/v1/stream/cors-check",
            headers={"Origin": "https://evil.example.net", **ds_preflight},
        )
        unconfigured = await client.options(
            f"{no_cors}/v1/stream/cors-check", headers={"Origin": LISTED, **ds_preflight}
        )
        read = await client.get(
            f"{cors}/v1/stream/cors-check", headers={"Origin": LISTED, "Authorization": "Bearer x"}
        )
        read_unlisted = await client.get(
            f"{cors}/v1/stream/cors-check", headers={"Origin": "https://evil.example.net"}
        )
        read_unconfigured = await client.get(
            f"{no_cors}/v1/stream/cors-check", headers={"Origin": LISTED}
        )
    assert listed.status_code == 204
    assert listed.headers["access-control-allow-origin"] == LISTED
    assert "Origin" in listed.headers["vary"]
    allowed = listed.headers["access-control-allow-headers"].lower()
    assert {"if-none-match", "stream-seq", "producer-id"} <= {h.strip() for h in allowed.split(",")}
    assert "HEAD" in listed.headers["access-control-allow-methods"]
    assert unlisted.status_code == 403 and unlisted.json()["error"]["code"] == "forbidden"
    assert read.status_code == 401
    assert read.headers["access-control-allow-origin"] == LISTED
    exposed = read.headers["access-control-expose-headers"].lower()
    assert "stream-next-offset" in exposed and "www-authenticate" in exposed
    for r in (unlisted, unconfigured, read_unlisted, read_unconfigured):
        assert not [h for h in r.headers if h.startswith("access-control-")], r.headers
