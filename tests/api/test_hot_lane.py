"""The hot routes' short lane (appends, Durable Streams) answers as the full FastAPI stack does.

Two services on one database, keyed and with CORS: one as built (appends
take the short lane), one with the lane switched off (every request through
FastAPI's whole stack). The same requests, each service on its own runs,
must get the same status, body and headers.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from agent_replay.api.app import create_app
from tests.conftest import settings_for
from tests.support.servers import serve_asgi

KEYS = "k-admin, k-read:read, k-append:append"
ORIGIN = "https://app.example"
# An ETag names the run in base64, which differs per service.
VOLATILE = {"date", "x-request-id", "etag"}


@dataclass(frozen=True)
class Call:
    name: str
    path: str  # {run} is the run id, different per service
    body: bytes = b'{"events": [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}]}'
    headers: tuple[tuple[str, str], ...] = (
        ("authorization", "Bearer k-append"),
        ("content-type", "application/json"),
    )
    method: str = "POST"


JSON = (("content-type", "application/json"),)
APPEND_KEY = (("authorization", "Bearer k-append"),)
CALLS = [
    Call("appended", "/v1/runs/{run}/events", headers=APPEND_KEY + JSON),
    Call("appended_again", "/v1/runs/{run}/events", headers=APPEND_KEY + JSON),
    Call("no_credential", "/v1/runs/{run}/events", headers=JSON),
    Call("unknown_key", "/v1/runs/{run}/events", headers=(("authorization", "Bearer nope"),)),
    Call("read_only_key", "/v1/runs/{run}/events", headers=(("authorization", "Bearer k-read"),)),
    Call("no_credential_bad_body", "/v1/runs/{run}/events", body=b"{not json", headers=JSON),
    Call("bad_json", "/v1/runs/{run}/events", body=b"{not json"),
    Call("not_an_object", "/v1/runs/{run}/events", body=b"[1]"),
    Call("unknown_field", "/v1/runs/{run}/events", body=b'{"events": [], "x": 1}'),
    Call("chunk_without_type", "/v1/runs/{run}/events", body=b'{"events": [{"a": 1}]}'),
    Call(
        "form_body",
        "/v1/runs/{run}/events",
        headers=(*APPEND_KEY, ("content-type", "application/x-www-form-urlencoded")),
    ),
    Call(
        "close_maybe",
        "/v1/runs/{run}/events?close=maybe",
        headers=(*APPEND_KEY, ("content-type", "application/x-ndjson")),
    ),
    Call("query_with_json", "/v1/runs/{run}/events?expected_seq=1"),
    Call(
        "seq_conflict",
        "/v1/runs/{run}/events",
        body=b'{"events": [{"type": "A"}], "expected_seq": 1}',
    ),
    Call("empty_on_missing_run", "/v1/runs/{run}-none/events", body=b'{"events": []}'),
    Call("bad_run_id", "/v1/runs/{run}%20x/events"),
    Call("token_in_query", "/v1/runs/{run}/events?token=k-append", headers=JSON),
    Call(
        "own_request_id",
        "/v1/runs/{run}/events",
        headers=(*APPEND_KEY, ("x-request-id", "caller-42")),
    ),
    Call("cors_listed", "/v1/runs/{run}/events", headers=(*APPEND_KEY, ("origin", ORIGIN))),
    Call("cors_listed_refused", "/v1/runs/{run}/events", headers=(("origin", ORIGIN),)),
    Call(
        "cors_unlisted",
        "/v1/runs/{run}/events",
        headers=(*APPEND_KEY, ("origin", "https://other.example")),
    ),
    Call(
        "ndjson_close",
        "/v1/runs/{run}/events?close=true",
        body=b'{"type": "RUN_FINISHED"}\n',
        headers=(*APPEND_KEY, ("content-type", "application/x-ndjson")),
    ),
    Call("after_close", "/v1/runs/{run}/events"),
    Call("trailing_slash", "/v1/runs/{run}/events/"),
    # Durable Streams, one endpoint for every method.
    Call("stream_created", "/v1/stream/{run}-s", b"", APPEND_KEY + JSON, "PUT"),
    Call("stream_appended", "/v1/stream/{run}-s", b'[{"type": "A"}]', APPEND_KEY + JSON),
    Call("stream_appended_again", "/v1/stream/{run}-s", b'{"type": "B"}', APPEND_KEY + JSON),
    Call(
        "stream_other_type",
        "/v1/stream/{run}-s",
        b"x",
        (*APPEND_KEY, ("content-type", "text/plain")),
    ),
    Call("stream_empty_array", "/v1/stream/{run}-s", b"[]", APPEND_KEY + JSON),
    Call("stream_no_credential", "/v1/stream/{run}-s", b'{"type": "C"}', JSON),
    Call(
        "stream_read_key",
        "/v1/stream/{run}-s",
        b'{"type": "C"}',
        (("authorization", "Bearer k-read"), *JSON),
    ),
    Call(
        "stream_read",
        "/v1/stream/{run}-s?offset=-1",
        b"",
        (("authorization", "Bearer k-read"),),
        "GET",
    ),
    Call("stream_head", "/v1/stream/{run}-s", b"", (("authorization", "Bearer k-read"),), "HEAD"),
    Call("stream_preflight", "/v1/stream/{run}-s", b"", (("origin", ORIGIN),), "OPTIONS"),
    Call("stream_missing", "/v1/stream/{run}-none", b'{"type": "C"}', APPEND_KEY + JSON),
    Call("stream_deleted", "/v1/stream/{run}-s", b"", APPEND_KEY, "DELETE"),
    Call(
        "stream_read_deleted",
        "/v1/stream/{run}-s?offset=-1",
        b"",
        (("authorization", "Bearer k-admin"),),
        "GET",
    ),
    Call("stream_bad_method", "/v1/stream/{run}-s", b"", APPEND_KEY, "PATCH"),
]


@pytest.fixture(scope="module")
async def services(database_url: str) -> AsyncIterator[dict[str, str]]:
    settings = settings_for(database_url, api_keys=KEYS, cors_origins=ORIGIN)
    hot = create_app(settings, migrate_on_start=False)
    full = create_app(settings, migrate_on_start=False)
    lanes = [route.path for route in hot.hot_routes]
    assert lanes == ["/v1/runs/{run_id}/events", "/v1/stream/{name:path}"], lanes
    full.hot_routes = ()
    async with serve_asgi(hot) as hot_url, serve_asgi(full) as full_url:
        yield {"hot": hot_url, "full": full_url}


async def answer(base: str, run: str, call: Call) -> tuple[int, str, dict[str, str]]:
    async with httpx.AsyncClient(base_url=base) as client:
        r = await client.request(
            call.method, call.path.format(run=run), content=call.body, headers=dict(call.headers)
        )
    headers = {
        k: v.replace(base, "BASE").replace(run, "RUN")
        for k, v in r.headers.items()
        if k not in VOLATILE
    }
    request_id = r.headers.get("x-request-id", "")
    caller = dict(call.headers).get("x-request-id")
    assert request_id == caller if caller else re.fullmatch(r"[0-9a-f]{32}", request_id)
    return r.status_code, r.text.replace(run, "RUN"), headers


async def test_hot_routes_when_served_by_the_short_lane_then_answers_as_the_full_stack(
    services: dict[str, str],
) -> None:
    seen: dict[str, int] = {}
    for call in CALLS:
        hot = await answer(services["hot"], "lane-hot", call)
        full = await answer(services["full"], "lane-all", call)
        assert hot == full, call.name
        seen[call.name] = hot[0]
    # The calls reach the conditions they are named for.
    assert seen["appended"] == 200 and seen["seq_conflict"] == 409
    assert seen["no_credential"] == seen["no_credential_bad_body"] == 401
    assert seen["read_only_key"] == 403 and seen["form_body"] == 415
    assert seen["bad_json"] == 400 and seen["after_close"] == 409
    assert (seen["stream_created"], seen["stream_appended"], seen["stream_read"]) == (201, 204, 200)
    assert (seen["stream_other_type"], seen["stream_empty_array"]) == (409, 400)
    assert (seen["stream_no_credential"], seen["stream_read_key"]) == (401, 403)
    assert (seen["stream_missing"], seen["stream_read_deleted"]) == (404, 404)
