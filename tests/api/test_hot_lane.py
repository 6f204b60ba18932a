"""The append route's short lane answers exactly as the full FastAPI stack does.

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

from service.api.app import create_app
from tests.conftest import settings_for
from tests.servers import serve_asgi

KEYS = "k-admin, k-read:read, k-append:append"
ORIGIN = "https://app.example"
VOLATILE = {"date", "x-request-id"}


@dataclass(frozen=True)
class Call:
    name: str
    path: str  # {run} is the run id, different per service
    body: bytes = b'{"events": [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}]}'
    headers: tuple[tuple[str, str], ...] = (("authorization", "Bearer k-append"),)


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
]


@pytest.fixture(scope="module")
async def services(database_url: str) -> AsyncIterator[dict[str, str]]:
    settings = settings_for(database_url, api_keys=KEYS, cors_origins=ORIGIN)
    hot = create_app(settings, migrate_on_start=False)
    full = create_app(settings, migrate_on_start=False)
    assert hot.hot_routes, "the app as built serves appends through the short lane"
    full.hot_routes = ()
    async with serve_asgi(hot) as hot_url, serve_asgi(full) as full_url:
        yield {"hot": hot_url, "full": full_url}


async def answer(base: str, run: str, call: Call) -> tuple[int, str, dict[str, str]]:
    async with httpx.AsyncClient(base_url=base) as client:
        r = await client.post(
            call.path.format(run=run), content=call.body, headers=dict(call.headers)
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


async def test_append_when_served_by_the_short_lane_then_answers_as_the_full_stack(
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
