"""Every route × every kind of credential → the expected status, and no refusal
changes the log. The table is written out by hand: a new route the table does
not list fails `test_matrix_covers_every_route_of_the_app`."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay.api.app import create_app
from agent_replay.api.auth import endpoints
from agent_replay.config import Settings
from tests.access.conftest import Keyed, log_digest, wait_hosted_closed

CREDENTIALS = ["none", "admin", "read", "append", "run", "thread", "run_token", "other",
               "expired", "tampered"]  # fmt: skip
ASK = {"messages": [{"id": "u-1", "role": "user", "content": "hi"}]}
UI_ASK = {"id": "u-1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
JSON_TYPE = {"Content-Type": "application/json"}
AGUI = {**ASK, "tools": [], "context": [], "state": {}, "forwardedProps": {}}

# (method, route template, path, request options, statuses in CREDENTIALS order)
# thread = a read+chat token for th-a; run_token = a read token for run ra-1;
# other = a read+chat token for th-b. ra-1/rb-1 are plain runs on th-a/th-b,
# ra-h/rb-h hosted ones (the run key reads hosted runs only).
ROWS: list[tuple[str, str, str, dict[str, Any], str]] = [
    ("GET", "/v1/runs", "/v1/runs", {},
     "401 200 200 403 403 403 403 403 401 401"),
    ("GET", "/v1/runs", "/v1/runs?thread_id=th-a", {},
     "401 200 200 403 403 200 403 403 401 401"),
    ("PUT", "/v1/runs/{run_id}", "/v1/runs/new-{cred}", {"json": {"thread_id": "th-put"}},
     "401 201 403 201 403 403 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/events", "/v1/runs/app-{cred}/events",
     {"json": {"events": [{"type": "A"}]}},
     "401 200 403 200 403 403 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/events", "/v1/runs/ra-1/events",
     {"json": {"events": [{"type": "A"}]}},
     "401 409 403 409 403 403 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/close", "/v1/runs/ra-1/close", {"headers": JSON_TYPE},
     "401 200 403 200 403 403 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}", "/v1/runs/ra-1", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/runs/{run_id}", "/v1/runs/ra-h", {},
     "401 200 200 403 200 200 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}", "/v1/runs/nope-1", {},
     "401 404 404 403 403 403 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}/events", "/v1/runs/ra-1/events", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/runs/{run_id}/events", "/v1/runs/rb-h/events", {},
     "401 200 200 403 200 403 403 200 401 401"),
    ("GET", "/v1/runs/{run_id}/stream", "/v1/runs/ra-1/stream", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/runs/{run_id}/stream", "/v1/runs/ra-h/stream?format=ndjson", {},
     "401 200 200 403 200 200 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}/messages", "/v1/runs/ra-1/messages", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/runs/{run_id}/export", "/v1/runs/ra-1/export", {},
     "401 200 200 403 403 403 403 403 401 401"),
    ("GET", "/v1/threads/{thread_id}/messages", "/v1/threads/th-a/messages", {},
     "401 200 200 403 403 200 403 403 401 401"),
    ("GET", "/v1/agents", "/v1/agents", {},
     "401 200 200 403 200 403 403 403 401 401"),
    ("POST", "/v1/agents/{agent}/runs", "/v1/agents/demo/runs",
     {"json": {"threadId": "th-a", **ASK}},
     "401 201 403 403 201 403 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/cancel", "/v1/runs/ra-h/cancel", {"headers": JSON_TYPE},
     "401 200 403 403 200 200 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/cancel", "/v1/runs/ra-1/cancel", {"headers": JSON_TYPE},
     "401 200 403 403 403 200 403 403 401 401"),
    ("POST", "/v1/chat/{agent}", "/v1/chat/demo",
     {"json": {"threadId": "th-a", **ASK}, "headers": {"X-Run-Id": "chat-{cred}"}},
     "401 200 403 403 200 200 403 403 401 401"),
    ("POST", "/v1/chat/{agent}", "/v1/chat/demo",
     {"json": {"threadId": "th-b", **ASK}, "headers": {"X-Run-Id": "chat-b-{cred}"}},
     "401 200 403 403 200 403 403 200 401 401"),
    # Starting "a run" whose id is another thread's existing run would hand that run over.
    ("POST", "/v1/chat/{agent}", "/v1/chat/demo",
     {"json": {"threadId": "th-a", **ASK}, "headers": {"X-Run-Id": "rb-1"}},
     "401 409 403 403 403 403 403 403 401 401"),
    ("POST", "/v1/chat/{agent}", "/v1/chat/demo",
     {"json": {"threadId": "th-a", **ASK}, "headers": {"X-Run-Id": "ra-h", "Last-Event-ID": "1"}},
     "401 200 200 403 200 200 403 403 401 401"),
    ("GET", "/v1/chat/{agent}", "/v1/chat/demo?runId=ra-h&offset=-1", {},
     "401 200 200 403 200 200 403 403 401 401"),
    ("GET", "/v1/chat/{agent}", "/v1/chat/demo?threadId=th-a", {},
     "401 200 200 403 200 200 403 403 401 401"),
    ("POST", "/v1/tokens", "/v1/tokens", {"json": {"thread_id": "th-a"}},
     "401 201 403 403 403 403 403 403 401 401"),
    ("GET", "/metrics", "/metrics", {},
     "401 200 403 403 403 403 403 403 401 401"),
    ("POST", "/v1/runs/{run_id}/fork", "/v1/runs/ra-1/fork", {"json": {"run_id": "fork-{cred}"}},
     "401 201 403 201 403 403 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}/transcript", "/v1/runs/ra-1/transcript", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/threads/{thread_id}/transcript", "/v1/threads/th-a/transcript", {},
     "401 200 200 403 403 200 403 403 401 401"),
    # The stream stays open: a cursor of no run of the thread is answered (409) before any byte.
    ("GET", "/v1/threads/{thread_id}/stream", "/v1/threads/th-a/stream",
     {"headers": {"Last-Event-ID": "nope-1:0"}},
     "401 409 409 403 403 409 403 403 401 401"),
    ("GET", "/v1/runs/{run_id}/verify", "/v1/runs/ra-1/verify", {},
     "401 200 200 403 403 200 200 403 401 401"),
    ("GET", "/v1/threads/{thread_id}/verify", "/v1/threads/th-a/verify", {},
     "401 200 200 403 403 200 403 403 401 401"),
    # Erasure is an admin key's; a thread nobody has (a 404 changes nothing the others read).
    ("DELETE", "/v1/threads/{thread_id}", "/v1/threads/th-none-{cred}?reason=asked", {},
     "401 404 403 403 403 403 403 403 401 401"),
    ("PUT", "/v1/stream/{name}", "/v1/stream/ds-{cred}", {"headers": JSON_TYPE},
     "401 201 403 201 403 403 403 403 401 401"),
    ("POST", "/v1/stream/{name}", "/v1/stream/ds-shared",
     {"headers": JSON_TYPE, "content": '[{"a": 1}]'},
     "401 204 403 204 403 403 403 403 401 401"),
    ("GET", "/v1/stream/{name}", "/v1/stream/ds-shared?offset=-1", {},
     "401 200 200 403 403 403 403 403 401 401"),
    ("DELETE", "/v1/stream/{name}", "/v1/stream/ds-gone-{cred}", {},
     "401 404 403 404 403 403 403 403 401 401"),
    ("POST", "/v1/ai-sdk/{agent}", "/v1/ai-sdk/demo",
     {"json": {"id": "th-a", "messages": [UI_ASK], "trigger": "submit-message"}},
     "401 200 403 403 200 200 403 403 401 401"),
    ("POST", "/v1/ai-sdk/{agent}", "/v1/ai-sdk/demo",
     {"json": {"id": "th-b", "messages": [UI_ASK], "trigger": "submit-message"}},
     "401 200 403 403 200 403 403 200 401 401"),
    # th-b: forks of ra-1 leave open runs on th-a, and this would follow them.
    ("GET", "/v1/ai-sdk/{agent}/{chat_id}/stream", "/v1/ai-sdk/demo/th-b/stream", {},
     "401 204 204 403 204 403 403 204 401 401"),
    ("GET", "/v1/ai-sdk/{agent}/{chat_id}/messages", "/v1/ai-sdk/demo/th-a/messages", {},
     "401 200 200 403 200 200 403 403 401 401"),
    ("POST", "/v1/agents/{agent}/ag-ui", "/v1/agents/demo/ag-ui",
     {"json": {"threadId": "th-a", "runId": "agui-{cred}", **AGUI}},
     "401 200 403 403 200 200 403 403 401 401"),
    ("POST", "/v1/agents/{agent}/ag-ui", "/v1/agents/demo/ag-ui",
     {"json": {"threadId": "th-a", "runId": "ra-h", **AGUI}},
     "401 200 403 403 200 200 403 403 401 401"),
    ("POST", "/v1/agents/{agent}/ag-ui", "/v1/agents/demo/ag-ui",
     {"json": {"threadId": "th-a", "runId": "rb-h", **AGUI}},
     "401 200 403 403 200 403 403 403 401 401"),
    ("POST", "/v1/agents/{agent}/ag-ui", "/v1/agents/demo/ag-ui",
     {"json": {"threadId": "th-a", "runId": "ra-h", **AGUI}, "headers": {"Last-Event-ID": "1"}},
     "401 200 200 403 200 200 403 403 401 401"),
]  # fmt: skip

# Served to anyone: probes, the documents, and pages that ask for a credential themselves.
PUBLIC = {
    ("GET", "/"), ("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/openapi.json"),
    ("GET", "/docs"), ("GET", "/docs/oauth2-redirect"), ("GET", "/redoc"),
    ("GET", "/favicon.svg"), ("GET", "/favicon.ico"),
    ("GET", "/inspect"), ("GET", "/inspect/runs/{run_id}"), ("GET", "/inspect/threads/{thread_id}"),
    ("GET", "/inspect/assets/{name}"),
    # CORS preflights of Durable Streams clients (they carry no credential).
    ("OPTIONS", "/v1/stream/{name}"),
}  # fmt: skip


def test_matrix_covers_every_route_of_the_app() -> None:
    app = create_app(Settings(database_url="postgresql://unused@127.0.0.1:1/x"))
    routes = {(m, e.path) for e in endpoints(app) for m in e.methods if m != "HEAD"}
    documented = {(m.upper(), p) for p, ops in app.openapi()["paths"].items() for m in ops}
    assert documented <= routes
    listed = {(method, template) for method, template, *_ in ROWS}
    assert routes - PUBLIC == listed


def _options(options: dict[str, Any], cred: str, headers: dict[str, str]) -> dict[str, Any]:
    """The request options with `{cred}` filled in (ids of one credential's own)."""
    out: dict[str, Any] = json.loads(json.dumps(options).replace("{cred}", cred))
    out["headers"] = {**out.get("headers", {}), **headers}
    return out


@pytest.mark.parametrize(
    ("method", "path", "options", "statuses"),
    [pytest.param(m, p, o, s, id=f"{m} {p}") for m, _, p, o, s in ROWS],
)
async def test_route_when_each_credential_then_expected_status_and_refusals_change_nothing(
    keyed: Keyed,
    db: asyncpg.Connection,
    method: str,
    path: str,
    options: dict[str, Any],
    statuses: str,
) -> None:
    expected = dict(zip(CREDENTIALS, map(int, statuses.split()), strict=True))
    got: dict[str, int] = {}
    async with httpx.AsyncClient(base_url=keyed.base_url, timeout=30) as client:
        for cred in CREDENTIALS:
            await wait_hosted_closed(db)
            before = await log_digest(db)
            url = path.replace("{cred}", cred)
            r = await client.request(
                method, url, **_options(options, cred, keyed.credentials[cred])
            )
            got[cred] = r.status_code
            if r.status_code >= 400:
                error = r.json()["error"]
                assert isinstance(error["code"], str) and error["message"], r.text
            if r.status_code == 401:
                assert r.headers["www-authenticate"].startswith("Bearer"), r.headers
                want = "token_expired" if cred == "expired" else "unauthorized"
                assert error["code"] == want, (cred, r.text)
            if r.status_code == 403:
                assert error["code"] == "forbidden", r.text
            if r.status_code in (401, 403):
                await wait_hosted_closed(db)
                assert await log_digest(db) == before, (cred, "a refusal changed the log")
    assert got == expected


# Every way a request names a run; RUN is the run's id. (A start naming an unknown id is not
# here: it creates that run.)
BY_RUN: list[tuple[str, str, dict[str, Any]]] = [
    ("GET", "/v1/runs/RUN", {}),
    ("GET", "/v1/runs/RUN/events", {}),
    ("GET", "/v1/runs/RUN/stream", {}),
    ("GET", "/v1/runs/RUN/messages", {}),
    ("GET", "/v1/runs/RUN/transcript", {}),
    ("GET", "/v1/runs/RUN/verify", {}),
    ("GET", "/v1/runs/RUN/export", {}),
    ("POST", "/v1/runs/RUN/cancel", {"headers": JSON_TYPE}),
    ("GET", "/v1/chat/demo?runId=RUN&offset=-1", {}),
    ("POST", "/v1/chat/demo",
     {"json": {"threadId": "th-a", **ASK}, "headers": {"X-Run-Id": "RUN", "Last-Event-ID": "1"}}),
    ("POST", "/v1/agents/demo/ag-ui",
     {"json": {"threadId": "th-a", "runId": "RUN", **AGUI}, "headers": {"Last-Event-ID": "1"}}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "options"), [pytest.param(*r, id=f"{r[0]} {r[1]}") for r in BY_RUN]
)
async def test_forbidden_when_run_exists_or_not_then_same_answer(
    keyed: Keyed, method: str, path: str, options: dict[str, Any]
) -> None:
    async with httpx.AsyncClient(base_url=keyed.base_url) as client:
        # Each credential against a run that exists but is not its own, and one that does not.
        for cred, existing in (("other", "ra-1"), ("run_token", "rb-1"), ("append", "ra-1"),
                               ("run", "rb-1"), ("thread", "rb-h"), ("other", "ra-h")):  # fmt: skip
            answers = []
            for run_id in (existing, "nope-9"):
                sent = json.loads(json.dumps(options).replace("RUN", run_id))
                sent["headers"] = {**sent.get("headers", {}), **keyed.credentials[cred]}
                r = await client.request(method, path.replace("RUN", run_id), **sent)
                answers.append(
                    (r.status_code, r.text.replace(run_id, "RUN"), r.headers.get("content-type"))
                )
            assert answers[0] == answers[1] and answers[0][0] == 403, (cred, answers)


# A chat token of th-a, each way a request can name (or leave out) the thread.
OTHER_THREAD: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/v1/chat/demo", {"json": {"threadId": "th-b", **ASK}}),
    ("POST", "/v1/chat/demo",
     {"json": {"threadId": "th-b", **ASK}, "headers": {"X-Run-Id": "x-1"}}),
    ("POST", "/v1/chat/demo", {"json": ASK}),  # no thread named
    ("GET", "/v1/chat/demo?threadId=th-b", {}),
    ("GET", "/v1/chat/demo?runId=rb-h&threadId=th-a", {}),
    ("POST", "/v1/ai-sdk/demo", {"json": {"id": "th-b", "messages": [UI_ASK]}}),
    ("GET", "/v1/ai-sdk/demo/th-b/messages", {}),
    ("GET", "/v1/ai-sdk/demo/th-b/stream", {}),
    ("POST", "/v1/agents/demo/ag-ui", {"json": {"threadId": "th-b", "runId": "x-2", **AGUI}}),
    ("GET", "/v1/threads/th-b/messages", {}),
    ("GET", "/v1/threads/th-b/transcript", {}),
    ("GET", "/v1/threads/th-b/stream", {}),
    ("GET", "/v1/threads/th-b/verify", {}),
    ("GET", "/v1/runs?thread_id=th-b", {}),
    ("POST", "/v1/agents/demo/runs", {"json": {"threadId": "th-a", **ASK}}),  # not through chat
]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "path", "options"),
    [pytest.param(*r, id=f"{r[0]} {r[1]} {i}") for i, r in enumerate(OTHER_THREAD)],
)
async def test_chat_token_when_request_names_another_thread_then_403_and_nothing_started(
    keyed: Keyed, db: asyncpg.Connection, method: str, path: str, options: dict[str, Any]
) -> None:
    await wait_hosted_closed(db)
    before = await log_digest(db)
    sent = {**options, "headers": {**options.get("headers", {}), **keyed.credentials["thread"]}}
    async with httpx.AsyncClient(base_url=keyed.base_url) as client:
        r = await client.request(method, path, **sent)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", r.text
    await wait_hosted_closed(db)
    assert await log_digest(db) == before


async def test_key_with_two_scopes_when_used_then_both_apply(keyed: Keyed) -> None:
    headers = {"Authorization": "Bearer k-multi"}
    async with httpx.AsyncClient(base_url=keyed.base_url) as client:
        r = await client.post("/v1/runs/multi-1/events", json={"events": [{"type": "A"}]},
                              headers=headers)  # fmt: skip
        assert r.status_code == 200
        assert (await client.get("/v1/runs/multi-1/events", headers=headers)).status_code == 200
        r = await client.post("/v1/agents/demo/runs", json=ASK, headers=headers)
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"


def test_openapi_when_read_then_every_v1_operation_states_its_security() -> None:
    doc = create_app(Settings(database_url="postgresql://unused@127.0.0.1:1/x")).openapi()
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {**schemes["bearer"], "type": "http", "scheme": "bearer"}
    assert (schemes["token"]["in"], schemes["token"]["name"]) == ("query", "token")
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if path.startswith("/v1/") or path == "/metrics":
                assert operation["security"] == [{"bearer": []}, {"token": []}], (method, path)
                assert "admin" in operation["x-access"]["key_scopes"], (method, path)
                assert "403" in operation["responses"] and "401" in operation["responses"]
            else:
                assert "security" not in operation, (method, path)
