"""A hosted agent's `forward_headers`: the starting request's cookie and headers reach its
upstream, on every route that starts a hosted run, for both protocols; the service's own key
never does; and no forwarded value is stored anywhere (the database's rows, read by SQL, the
run's export, the service's log), even when the upstream's error page echoes them.

Against a real `agent-replay serve` (with an API key, its log read from its stderr) and an
upstream on loopback that records every request it gets and answers a short stream.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tests.agents.conftest import follow
from tests.conftest import settings_for
from tests.support.servers import serve_asgi, serve_in_process, serve_subprocess

KEY = "service-key-7c1e55d0a9b34f2e"
COOKIE = "session=cookie-value-4f1a9e; theme=dark"
COOKIE_VALUE = "cookie-value-4f1a9e"
USER = "user-id-value-77c2b8"
UPSTREAM_AUTH = "Bearer upstream-token-9d3e61"
SECRETS = (COOKIE_VALUE, USER, "upstream-token-9d3e61")
# Stored on purpose (the user's message): the scans below must find it, or they see nothing.
MARKER = "marker-of-what-is-stored-31f0"
ORIGIN = "https://app.example"

SENT = {
    "Authorization": f"Bearer {KEY}",
    "Cookie": COOKIE,
    "X-User-Id": USER,
    "X-Upstream-Authorization": UPSTREAM_AUTH,
}
FORWARD = {"cookie": "cookie", "x-user-id": "x-user-id",
           "x-upstream-authorization": "authorization"}  # fmt: skip


def _frames(chunks: list[Any]) -> AsyncIterator[bytes]:
    async def frames() -> AsyncIterator[bytes]:
        for chunk in chunks:
            text = chunk if isinstance(chunk, str) else json.dumps(chunk)
            yield f"data: {text}\n\n".encode()

    return frames()


async def _seen(request: Request) -> dict[str, Any]:
    body = await request.json()
    request.app.state.seen.append({"headers": request.headers.items(), "body": body})
    return dict(body)


async def agui(request: Request) -> Response:
    body = await _seen(request)
    run, thread = body["runId"], body["threadId"]
    events = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]
    return StreamingResponse(_frames(events), media_type="text/event-stream")


async def chat(request: Request) -> Response:
    await _seen(request)
    chunks: list[Any] = [
        {"type": "start", "messageId": "a"},
        {"type": "text-start", "id": "t"},
        {"type": "text-delta", "id": "t", "delta": "hello"},
        {"type": "text-end", "id": "t"},
        {"type": "finish"},
        "[DONE]",
    ]
    headers = {"x-vercel-ai-ui-message-stream": "v1"}
    return StreamingResponse(_frames(chunks), media_type="text/event-stream", headers=headers)


async def refuses(request: Request) -> Response:
    """A 401 whose page echoes the request's headers, as debugging pages do."""
    await _seen(request)
    return Response(f"not you: {request.headers.items()}", status_code=401)


@dataclass
class Service:
    base: str
    upstream: Starlette
    database_url: str
    log: Path


@pytest.fixture(scope="module")
async def service(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Any:
    upstream = Starlette(
        routes=[
            Route("/agui", agui, methods=["POST"]),
            Route("/chat", chat, methods=["POST"]),
            Route("/refuses", refuses, methods=["POST"]),
        ]
    )
    upstream.state.seen = []
    log = tmp_path_factory.mktemp("forward") / "replay.log"
    async with serve_asgi(upstream) as base:
        agents = {
            "agui": {"url": f"{base}/agui", "headers": {"X-Static": "static"},
                     "forward_headers": FORWARD},
            "next": {"url": f"{base}/chat", "protocol": "ai-sdk", "forward_headers": FORWARD},
            "refuses": {"url": f"{base}/refuses", "protocol": "ai-sdk",
                        "forward_headers": FORWARD},
            "plain": f"{base}/agui",
        }  # fmt: skip
        env = {
            "REPLAY_DATABASE_URL": database_url,
            "REPLAY_AGENTS": json.dumps(agents),
            "REPLAY_API_KEYS": KEY,
            "REPLAY_CORS_ORIGINS": ORIGIN,
            "REPLAY_LOG_FORMAT": "text",
        }
        with (
            log.open("wb") as log_file,
            serve_subprocess(env, log_level="debug", log_file=log_file) as (replay, _),
        ):
            yield Service(replay, upstream, database_url, log)


@pytest.fixture
async def http(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base, timeout=30) as client:
        yield client


async def _stored_rows_holding(database_url: str, needle: str) -> list[str]:
    """Every table of the database (partitions, the run's input, events, its error...)
    whose rows, as text, hold `needle`."""
    conn = await asyncpg.connect(database_url)
    try:
        tables = await conn.fetch(
            "SELECT quote_ident(table_schema) || '.' || quote_ident(table_name) AS name "
            "FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_schema NOT IN ('pg_catalog', 'information_schema')"
        )
        found = []
        for table in tables:
            query = f"SELECT count(*) FROM {table['name']} AS t WHERE strpos(t::text, $1) > 0"
            if await conn.fetchval(query, needle):
                found.append(table["name"])
        return found
    finally:
        await conn.close()


async def _nothing_forwarded_stored(service: Service, http: httpx.AsyncClient, run_id: str) -> None:
    assert await _stored_rows_holding(service.database_url, MARKER)  # the scan sees rows
    exported = await http.get(f"/v1/runs/{run_id}/export", headers=_key())
    assert exported.status_code == 200 and MARKER in exported.text
    log_text = service.log.read_text()
    assert "replay.access" in log_text
    for secret in SECRETS:
        assert await _stored_rows_holding(service.database_url, secret) == [], secret
        assert secret not in exported.text
        assert secret not in log_text
    assert KEY not in log_text


def _key() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEY}"}


def _last_request(service: Service) -> dict[str, list[str]]:
    headers: dict[str, list[str]] = {}
    for name, value in service.upstream.state.seen[-1]["headers"]:
        headers.setdefault(name, []).append(value)
    return headers


def _forwarded_arrived(service: Service, *, static: bool) -> None:
    got = _last_request(service)
    assert got["cookie"] == [COOKIE]
    assert got["x-user-id"] == [USER]
    assert got["authorization"] == [UPSTREAM_AUTH]  # the renamed header, not the service's
    assert "x-upstream-authorization" not in got
    assert all(KEY not in value for values in got.values() for value in values)
    assert ("x-static" in got) is static


async def _run_on_thread(http: httpx.AsyncClient, thread: str) -> str:
    runs = (await http.get("/v1/runs", params={"thread_id": thread}, headers=_key())).json()
    [run] = runs["runs"]
    return str(run["run_id"])


async def test_ai_sdk_chat_route_when_agent_forwards_headers_then_they_arrive_and_are_not_stored(
    service: Service, http: httpx.AsyncClient
) -> None:
    body = {"id": "chat-fw-1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": MARKER}]}]}  # fmt: skip
    async with http.stream("POST", "/v1/ai-sdk/next", json=body, headers=SENT) as answer:
        assert answer.status_code == 200, await answer.aread()
        text = (await answer.aread()).decode()
    assert "data: [DONE]" in text and '"delta":"hello"' in text.replace(" ", "")
    _forwarded_arrived(service, static=False)
    assert service.upstream.state.seen[-1]["body"]["messages"][0]["parts"][0]["text"] == MARKER
    run_id = await _run_on_thread(http, "chat-fw-1")
    await _nothing_forwarded_stored(service, http, run_id)


@pytest.mark.parametrize("route", ["ag-ui", "runs", "chat"])
async def test_ag_ui_agent_started_by_each_route_when_headers_forwarded_then_they_arrive_not_stored(
    service: Service, http: httpx.AsyncClient, route: str
) -> None:
    run_id = f"run-fw-{route}"
    body = {"threadId": f"thread-fw-{route}", "runId": run_id,
            "messages": [{"id": "u1", "role": "user", "content": MARKER}]}  # fmt: skip
    if route == "runs":
        started = await http.post("/v1/agents/agui/runs", json=body, headers=SENT)
        assert started.status_code == 201, started.text
        async with httpx.AsyncClient(base_url=service.base, timeout=30, headers=_key()) as keyed:
            events = await follow(keyed, run_id)
        assert events[-1]["type"] == "RUN_FINISHED", events
    else:
        path = "/v1/agents/agui/ag-ui" if route == "ag-ui" else "/v1/chat/agui"
        async with http.stream("POST", path, json=body, headers=SENT) as answer:
            assert answer.status_code == 200, await answer.aread()
            assert "RUN_FINISHED" in (await answer.aread()).decode()
    _forwarded_arrived(service, static=True)
    assert _last_request(service)["x-static"] == ["static"]
    await _nothing_forwarded_stored(service, http, run_id)


async def test_agent_without_forward_headers_when_started_with_them_then_none_is_sent(
    service: Service, http: httpx.AsyncClient
) -> None:
    body = {"threadId": "thread-plain", "runId": "run-plain", "messages": []}
    async with http.stream("POST", "/v1/agents/plain/ag-ui", json=body, headers=SENT) as answer:
        assert answer.status_code == 200
        assert "RUN_FINISHED" in (await answer.aread()).decode()
    got = _last_request(service)
    assert service.upstream.state.seen[-1]["body"]["runId"] == "run-plain"
    assert not {"cookie", "x-user-id", "authorization", "x-upstream-authorization"} & set(got)


async def test_upstream_error_page_echoing_the_headers_when_the_run_fails_then_values_blanked(
    service: Service, http: httpx.AsyncClient
) -> None:
    body = {"id": "chat-fw-refused", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": MARKER}]}]}  # fmt: skip
    async with http.stream("POST", "/v1/ai-sdk/refuses", json=body, headers=SENT) as answer:
        assert answer.status_code == 200
        text = (await answer.aread()).decode()
    assert "HTTP 401" in text and "[redacted]" in text, text
    assert _last_request(service)["cookie"] == [COOKIE]  # it did get them, and echoed them
    for secret in SECRETS:
        assert secret not in text
    await _nothing_forwarded_stored(service, http, await _run_on_thread(http, "chat-fw-refused"))


@pytest.mark.parametrize("where", ["Cookie", "X-User-Id", "X-Upstream-Authorization"])
async def test_forwarded_header_holding_the_service_key_when_starting_then_400_nothing_started(
    service: Service, http: httpx.AsyncClient, where: str
) -> None:
    before = len(service.upstream.state.seen)
    thread = f"thread-key-{where.lower()}"
    body = {"threadId": thread, "runId": f"run-key-{where.lower()}", "messages": []}
    for credential in (f"Bearer {KEY}", f"k={KEY}"):
        headers = {**SENT, where: credential}
        answer = await http.post("/v1/agents/agui/ag-ui", json=body, headers=headers)
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["code"] == "forwarded_credential"
        assert KEY not in answer.text
    runs = (await http.get("/v1/runs", params={"thread_id": thread}, headers=_key())).json()
    assert runs["runs"] == []
    assert len(service.upstream.state.seen) == before


async def test_forwarded_headers_over_the_bound_when_starting_then_431_nothing_started(
    service: Service, http: httpx.AsyncClient
) -> None:
    before = len(service.upstream.state.seen)
    headers = {**SENT, "X-User-Id": "u" * 9000, "Cookie": "c=" + "v" * 9000}
    body = {"id": "chat-too-large", "messages": []}
    answer = await http.post("/v1/ai-sdk/next", json=body, headers=headers)
    assert answer.status_code == 431, answer.text
    assert answer.json()["error"]["code"] == "forwarded_headers_too_large"
    runs = await http.get("/v1/runs", params={"thread_id": "chat-too-large"}, headers=_key())
    assert runs.json()["runs"] == []
    assert len(service.upstream.state.seen) == before


async def test_listed_origin_preflight_when_agents_forward_headers_then_allowed_with_cookies(
    http: httpx.AsyncClient,
) -> None:
    ask = {"Origin": ORIGIN, "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "x-user-id, x-upstream-authorization"}  # fmt: skip
    answer = await http.options("/v1/ai-sdk/next", headers=ask)
    assert answer.status_code == 204
    allowed = {h.strip().lower() for h in answer.headers["access-control-allow-headers"].split(",")}
    assert {"x-user-id", "x-upstream-authorization", "authorization"} <= allowed
    assert "cookie" not in allowed  # the browser sends it by itself
    assert answer.headers["access-control-allow-credentials"] == "true"
    unlisted = await http.options(
        "/v1/ai-sdk/next", headers={**ask, "Origin": "https://evil.example"}
    )
    assert unlisted.status_code == 403
    assert "access-control-allow-credentials" not in unlisted.headers


async def test_any_origin_allowed_when_an_agent_forwards_cookies_then_never_with_credentials(
    database_url: str,
) -> None:
    agents = {"next": {"url": "http://127.0.0.1:9/chat", "protocol": "ai-sdk",
                       "forward_headers": ["cookie", "x-user-id"]}}  # fmt: skip
    settings = settings_for(database_url, agents=json.dumps(agents), cors_origins="*")
    ask = {"Origin": "https://any.example", "Access-Control-Request-Method": "POST",
           "Access-Control-Request-Headers": "x-user-id"}  # fmt: skip
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=30) as http,
    ):
        preflight = await http.options("/v1/ai-sdk/next", headers=ask)
        answer = await http.get("/v1/agents", headers={"Origin": "https://any.example"})
    assert preflight.status_code == 204
    assert "x-user-id" in preflight.headers["access-control-allow-headers"].lower()
    assert answer.headers["access-control-allow-origin"] == "https://any.example"
    for response in (preflight, answer):
        assert "access-control-allow-credentials" not in response.headers
