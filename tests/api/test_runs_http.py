"""The runs API over a real socket: every bad input is a 4xx JSON error and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.servers import serve_in_process

NDJSON = {"Content-Type": "application/x-ndjson"}
JSON_TYPE = {"Content-Type": "application/json"}


async def log_of(client: httpx.AsyncClient, run_id: str) -> list[dict[str, Any]]:
    r = await client.get(f"/v1/runs/{run_id}/events", params={"limit": 10_000})
    if r.status_code == 404:
        return []
    assert r.status_code == 200, r.text
    events: list[dict[str, Any]] = r.json()["events"]
    return events


def assert_error(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    error: dict[str, Any] = body["error"]
    return error


async def test_put_run_when_new_then_201_and_when_repeated_then_200(
    client: httpx.AsyncClient,
) -> None:
    body = {"thread_id": "t-1", "metadata": {"user": "u1"}}
    first = await client.put("/v1/runs/put-1", json=body)
    again = await client.put("/v1/runs/put-1", json=body)
    assert (first.status_code, again.status_code) == (201, 200)
    run = again.json()
    assert (run["thread_id"], run["metadata"], run["status"], run["last_seq"]) == (
        "t-1",
        {"user": "u1"},
        "running",
        0,
    )
    assert_error(
        await client.put("/v1/runs/put-1", json={"thread_id": "other"}), 409, "run_conflict"
    )


async def test_append_json_batch_then_answer_after_commit_with_seqs(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/v1/runs/json-1/events", json={"events": [{"type": "A"}, {"type": "B"}]})
    assert r.json() == {"run_id": "json-1", "first_seq": 1, "last_seq": 2}
    r = await client.post(
        "/v1/runs/json-1/events", json={"events": [{"type": "C"}], "expected_seq": 3}
    )
    assert r.json() == {"run_id": "json-1", "first_seq": 3, "last_seq": 3}
    assert [e["type"] for e in await log_of(client, "json-1")] == ["A", "B", "C"]


async def test_append_ndjson_then_lines_stored_as_sent(client: httpx.AsyncClient) -> None:
    body = b'{"type":"A","big":123456789012345678901234567890}\n\n{"type":"B","s":"\\ud83d"}\r\n'
    r = await client.post("/v1/runs/nd-1/events", content=body, headers=NDJSON)
    assert r.json() == {"run_id": "nd-1", "first_seq": 1, "last_seq": 2}
    r = await client.post(
        "/v1/runs/nd-1/events",
        params={"expected_seq": 3, "close": "true"},
        content=b'{"type":"RUN_FINISHED"}',
        headers=NDJSON,
    )
    assert r.json()["last_seq"] == 3
    events = await log_of(client, "nd-1")
    assert events[0]["chunk"]["big"] == 123456789012345678901234567890
    assert events[1]["chunk"]["s"] == "\ud83d"
    assert (await client.get("/v1/runs/nd-1")).json()["status"] == "finished"


async def test_events_page_when_limited_then_next_after_continues_until_null(
    client: httpx.AsyncClient,
) -> None:
    await client.post(
        "/v1/runs/page-1/events", json={"events": [{"type": "E", "i": i} for i in range(5)]}
    )
    page = (await client.get("/v1/runs/page-1/events", params={"limit": 2})).json()
    assert [e["seq"] for e in page["events"]] == [1, 2] and page["next_after"] == 2
    page = (await client.get("/v1/runs/page-1/events", params={"after": 4, "limit": 2})).json()
    assert [e["chunk"]["i"] for e in page["events"]] == [4] and page["next_after"] is None


BAD_BATCHES: list[tuple[str, dict[str, Any], int, str]] = [
    (
        "not json",
        {"content": b'{"events": [', "headers": {"Content-Type": "application/json"}},
        400,
        "invalid_json",
    ),
    (
        "nan",
        {"content": b'{"events": [{"type": "A", "x": NaN}]}', "headers": JSON_TYPE},
        400,
        "invalid_json",
    ),
    ("no events", {"json": {"chunks": []}}, 422, "invalid_request"),
    ("event not object", {"json": {"events": [{"type": "A"}, 3]}}, 422, "invalid_event"),
    ("empty type", {"json": {"events": [{"type": "A"}, {"type": ""}]}}, 422, "invalid_event"),
    ("type not string", {"json": {"events": [{"type": 1}]}}, 422, "invalid_event"),
    (
        "bad expected",
        {"json": {"events": [{"type": "A"}], "expected_seq": 0}},
        422,
        "invalid_request",
    ),
    (
        "expected past bigint",
        {"json": {"events": [{"type": "A"}], "expected_seq": 2**70}},
        422,
        "invalid_request",
    ),
    (
        "ndjson expected not ascii",
        {"content": b'{"type":"A"}\n', "headers": NDJSON, "params": {"expected_seq": "\u00b2"}},
        422,
        "invalid_request",
    ),
    (
        "ndjson expected past bigint",
        {"content": b'{"type":"A"}\n', "headers": NDJSON, "params": {"expected_seq": str(2**70)}},
        422,
        "invalid_request",
    ),
    (
        "bad ndjson line",
        {"content": b'{"type":"A"}\n{oops\n', "headers": NDJSON},
        400,
        "invalid_json",
    ),
    ("ndjson array", {"content": b'{"type":"A"}\n[1]\n', "headers": NDJSON}, 422, "invalid_event"),
    (
        "media type",
        {"content": b"<x/>", "headers": {"Content-Type": "application/xml"}},
        415,
        "unsupported_media_type",
    ),
]


@pytest.mark.parametrize(
    ("case", "request_kwargs", "status", "code"), BAD_BATCHES, ids=[c[0] for c in BAD_BATCHES]
)
async def test_append_when_batch_malformed_then_4xx_json_error_and_log_unchanged(
    client: httpx.AsyncClient, case: str, request_kwargs: dict[str, Any], status: int, code: str
) -> None:
    run_id = "bad-" + case.replace(" ", "-")
    await client.post(f"/v1/runs/{run_id}/events", json={"events": [{"type": "KEEP"}]})
    before = await log_of(client, run_id)
    r = await client.post(f"/v1/runs/{run_id}/events", **request_kwargs)
    assert_error(r, status, code)
    assert await log_of(client, run_id) == before


@pytest.mark.parametrize(
    "path",
    [
        f"/v1/runs/kept/events?after={2**70}",
        f"/v1/runs/kept/messages?at={2**70}",
        "/v1/chat/demo?threadId=t&before=%C2%B2",
    ],
)
async def test_reads_when_numbers_out_of_range_or_not_ascii_then_422(
    client: httpx.AsyncClient, path: str
) -> None:
    await client.post("/v1/runs/kept/events", json={"events": [{"type": "KEEP"}]})
    assert_error(await client.get(path), 422, "invalid_request")


async def test_append_when_invalid_event_then_error_names_index(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/v1/runs/idx-1/events", json={"events": [{"type": "A"}, {"type": "B"}, {}]}
    )
    assert assert_error(r, 422, "invalid_event")["index"] == 2
    assert (await client.get("/v1/runs/idx-1")).status_code == 404


async def test_append_when_conflicting_expected_seq_then_409_with_last_seq(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/runs/conf-1/events", json={"events": [{"type": "A"}]})
    r = await client.post(
        "/v1/runs/conf-1/events", json={"events": [{"type": "X"}], "expected_seq": 1}
    )
    assert assert_error(r, 409, "seq_conflict")["last_seq"] == 1
    assert [e["type"] for e in await log_of(client, "conf-1")] == ["A"]


async def test_append_when_retried_then_same_answer_and_nothing_added(
    client: httpx.AsyncClient,
) -> None:
    body = {"events": [{"type": "A", "n": 1}, {"type": "B"}], "expected_seq": 1}
    first = await client.post("/v1/runs/idem-1/events", json=body)
    again = await client.post("/v1/runs/idem-1/events", json=body)
    assert first.json() == again.json() == {"run_id": "idem-1", "first_seq": 1, "last_seq": 2}
    assert len(await log_of(client, "idem-1")) == 2


async def test_append_when_run_closed_then_409_run_closed_and_close_again_is_noop(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/v1/runs/shut-1/events", json={"events": [{"type": "A"}]})
    closed = await client.post(
        "/v1/runs/shut-1/close", headers={"Content-Type": "application/json"}
    )
    assert closed.json()["closed"] is True and closed.json()["closed_at"]
    assert (
        await client.post("/v1/runs/shut-1/close", headers={"Content-Type": "application/json"})
    ).json() == closed.json()
    r = await client.post("/v1/runs/shut-1/events", json={"events": [{"type": "B"}]})
    assert assert_error(r, 409, "run_closed")["last_seq"] == 1
    assert len(await log_of(client, "shut-1")) == 1


async def test_unknown_run_when_read_or_closed_then_404_run_not_found(
    client: httpx.AsyncClient,
) -> None:
    for r in (
        await client.get("/v1/runs/nope-1"),
        await client.get("/v1/runs/nope-1/events"),
        await client.post("/v1/runs/nope-1/close", headers={"Content-Type": "application/json"}),
    ):
        assert_error(r, 404, "run_not_found")
    assert (await client.get("/v1/runs/nope-1")).status_code == 404


async def test_run_id_when_malformed_then_422_invalid_run_id(client: httpx.AsyncClient) -> None:
    for run_id in ("a%20b", "x" * 129, "%C3%A9"):
        assert_error(
            await client.post(f"/v1/runs/{run_id}/events", json={"events": [{"type": "A"}]}),
            422,
            "invalid_run_id",
        )


@pytest.fixture(scope="module")
async def small_limits(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_for(
        database_url, max_chunk_bytes=200, max_batch_bytes=600, max_batch_events=5
    )
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url) as http,
    ):
        yield http


async def test_append_when_over_limits_then_413_and_nothing_stored(
    small_limits: httpx.AsyncClient,
) -> None:
    client = small_limits
    cases = [
        {"json": {"events": [{"type": "A", "pad": "x" * 300}]}},
        {"json": {"events": [{"type": "A"}] * 6}},
        {"json": {"events": [{"type": "A", "pad": "x" * 150}] * 4}},
        {"content": b"\n".join([b'{"type":"A"}'] * 6), "headers": NDJSON},
    ]
    for kwargs in cases:
        assert_error(await client.post("/v1/runs/big-1/events", **kwargs), 413, "payload_too_large")
    assert (await client.get("/v1/runs/big-1")).status_code == 404


@pytest.fixture(scope="module")
async def keyed(database_url: str) -> AsyncIterator[str]:
    async with serve_in_process(settings_for(database_url, api_keys="k1, k2")) as running:
        yield running.base_url


async def test_api_keys_when_set_then_v1_needs_bearer_and_health_does_not(keyed: str) -> None:
    async with httpx.AsyncClient(base_url=keyed) as client:
        assert_error(await client.get("/v1/runs/any-1"), 401, "unauthorized")
        assert_error(
            await client.get("/v1/runs/any-1", headers={"Authorization": "Bearer k3"}),
            401,
            "unauthorized",
        )
        ok = await client.get("/v1/runs/any-1", headers={"Authorization": "Bearer k2"})
        assert ok.status_code == 404
        assert (await client.get("/healthz")).status_code == 200


async def test_readyz_when_migrated_then_ready_at_head(client: httpx.AsyncClient) -> None:
    r = await client.get("/readyz")
    assert r.status_code == 200 and r.json()["status"] == "ready"


async def test_openapi_describes_every_v1_route(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    paths = doc["paths"]
    assert {"put", "get"} <= set(paths["/v1/runs/{run_id}"])
    assert (
        "post" in paths["/v1/runs/{run_id}/events"] and "get" in paths["/v1/runs/{run_id}/events"]
    )
    content = paths["/v1/runs/{run_id}/events"]["post"]["requestBody"]["content"]
    assert {"application/json", "application/x-ndjson"} <= set(content)
    assert "post" in paths["/v1/runs/{run_id}/close"]
    json.dumps(doc)
