"""Stored-run projections over HTTP: as of a seq, finalized when closed, cached once,
and thread transcripts that reuse the cache."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay.audit.projection import id_prefix
from agent_replay.log import EventLog
from agent_replay.projector import project
from agent_replay.projector.jsvalues import parse_json
from tests.audit.data import every_part, run_input, simple
from tests.audit.helpers import store, store_thread


def fresh(run_id: str, chunks: list[dict[str, Any]], *, finalize: bool) -> list[dict[str, Any]]:
    return project(chunks, finalize=finalize, id_prefix=id_prefix(run_id))


async def _cache_rows(url: str, *run_ids: str) -> dict[tuple[str, bool], str]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT run_id, normalize, messages FROM run_projections WHERE run_id = ANY($1)",
            list(run_ids),
        )
        return {(r["run_id"], r["normalize"]): r["messages"] for r in rows}
    finally:
        await conn.close()


@pytest.fixture(scope="module")
async def log(database_url: str) -> Any:
    opened = await EventLog.open(database_url)
    yield opened
    await opened.close()


async def test_messages_when_run_closed_then_finalized_cached_and_equal_to_fresh_rebuild(
    client: httpx.AsyncClient, database_url: str, log: EventLog
) -> None:
    chunks = every_part("msg-closed", "msg-t1")
    await store(log, "msg-closed", chunks, thread_id="msg-t1")
    assert await _cache_rows(database_url, "msg-closed") == {}
    r = await client.get("/v1/runs/msg-closed/messages")
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["seq"], body["finalized"]) == (len(chunks), True)
    rebuilt = fresh("msg-closed", chunks, finalize=True)
    assert body["messages"] == rebuilt
    cached = await _cache_rows(database_url, "msg-closed")
    assert list(cached) == [("msg-closed", False)]
    assert parse_json(cached["msg-closed", False]) == rebuilt
    # Served from the cache the second time: the same bytes.
    assert (await client.get("/v1/runs/msg-closed/messages")).content == r.content


@pytest.mark.parametrize("at", [0, 1, 5, 13, 30])
async def test_messages_when_at_seq_then_projection_of_that_prefix_not_finalized(
    client: httpx.AsyncClient, log: EventLog, at: int
) -> None:
    run_id = f"msg-at-{at}"
    chunks = every_part(run_id, "msg-t2")
    await store(log, run_id, chunks, thread_id="msg-t2")
    body = (await client.get(f"/v1/runs/{run_id}/messages", params={"at": at})).json()
    assert (body["seq"], body["finalized"]) == (at, False)
    assert body["messages"] == fresh(run_id, chunks[:at], finalize=False)


async def test_messages_when_at_reaches_end_of_closed_run_then_finalized(
    client: httpx.AsyncClient, log: EventLog
) -> None:
    chunks = simple("msg-end", "msg-t3", "  ")  # whitespace-only: finalize drops it
    await store(log, "msg-end", chunks, thread_id="msg-t3")
    final = (await client.get("/v1/runs/msg-end/messages", params={"at": len(chunks)})).json()
    before = (await client.get("/v1/runs/msg-end/messages", params={"at": 4})).json()
    assert final["finalized"] and final["messages"] == []
    assert not before["finalized"] and len(before["messages"]) == 1


async def test_messages_when_run_open_then_not_finalized_and_not_cached(
    client: httpx.AsyncClient, database_url: str, log: EventLog
) -> None:
    chunks = simple("msg-open", "msg-t4", "partial")[:3]
    await store(log, "msg-open", chunks, thread_id="msg-t4", close=False)
    body = (await client.get("/v1/runs/msg-open/messages")).json()
    assert (body["seq"], body["finalized"]) == (3, False)
    assert body["messages"] == fresh("msg-open", chunks, finalize=False)
    assert await _cache_rows(database_url, "msg-open") == {}


async def test_messages_when_normalize_then_cached_separately(
    client: httpx.AsyncClient, database_url: str, log: EventLog
) -> None:
    chunks = every_part("msg-norm", "msg-t5")
    await store(log, "msg-norm", chunks, thread_id="msg-t5")
    plain = (await client.get("/v1/runs/msg-norm/messages")).json()["messages"]
    normalized = (await client.get("/v1/runs/msg-norm/messages?normalize=true")).json()
    assert normalized["messages"] == project(
        chunks, normalize=True, id_prefix=id_prefix("msg-norm")
    )
    assert plain == fresh("msg-norm", chunks, finalize=True)
    assert set(await _cache_rows(database_url, "msg-norm")) == {
        ("msg-norm", False),
        ("msg-norm", True),
    }


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/v1/runs/msg-none/messages", 404, "run_not_found"),
        ("/v1/runs/msg-t-bad!/messages", 422, "invalid_run_id"),
        ("/v1/threads/msg-none/messages", 404, "thread_not_found"),
    ],
)
async def test_messages_when_unknown_then_error_body(
    client: httpx.AsyncClient, path: str, status: int, code: str
) -> None:
    r = await client.get(path)
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)


async def test_messages_when_at_past_last_seq_then_409_and_when_negative_then_422(
    client: httpx.AsyncClient, log: EventLog
) -> None:
    await store(log, "msg-short", simple("msg-short", "msg-t6", "hi"), thread_id="msg-t6")
    r = await client.get("/v1/runs/msg-short/messages", params={"at": 6})
    assert (r.status_code, r.json()["error"]["code"]) == (409, "offset_out_of_range")
    r = await client.get("/v1/runs/msg-short/messages", params={"at": -1})
    assert r.status_code == 422


async def test_thread_messages_when_runs_mixed_then_user_turns_from_inputs_then_assistant(
    client: httpx.AsyncClient, log: EventLog
) -> None:
    a, b, c = await store_thread(log, "msg-mixed")
    body = (await client.get("/v1/threads/msg-mixed/messages")).json()
    roles_and_ids = [(m["role"], m["id"]) for m in body["messages"]]
    assert roles_and_ids == [
        ("user", f"{a}-u0"),
        ("user", f"{a}-photo"),  # from the run's own snapshot
        ("assistant", f"{a}-m1"),
        ("assistant", f"{a}-m2"),
        ("user", f"{b}-u0"),
        ("user", f"{b}-u1"),
        ("assistant", f"{b}-m1"),
        ("user", f"{c}-u0"),
        ("assistant", f"{c}-m1"),
    ]
    users = {m["id"]: m["parts"] for m in body["messages"] if m["role"] == "user"}
    assert users[f"{b}-u1"] == [{"type": "text", "content": "please"}]
    assert users[f"{c}-u0"] == [{"type": "text", "content": "And tomorrow?"}]


async def test_thread_messages_when_100_closed_runs_then_projected_once_and_served_from_cache(
    client: httpx.AsyncClient, database_url: str, log: EventLog
) -> None:
    thread = "msg-hundred"
    run_ids = [f"h{i:03d}" for i in range(100)]
    for run_id in run_ids:  # one by one: created_at orders the thread
        await store(log, run_id, simple(run_id, thread, f"answer {run_id}"), thread_id=thread,
                    input=run_input(run_id, thread, f"question {run_id}", history=1))  # fmt: skip
    first = await client.get(f"/v1/threads/{thread}/messages")
    assert first.status_code == 200
    expected: list[dict[str, Any]] = []
    for run_id in run_ids:
        expected.append({"id": f"{run_id}-u0", "role": "user",
                         "parts": [{"type": "text", "content": f"question {run_id}"}]})  # fmt: skip
        expected += fresh(run_id, simple(run_id, thread, f"answer {run_id}"), finalize=True)
    assert first.json()["messages"] == expected
    assert len(await _cache_rows(database_url, *run_ids)) == 100
    # Without their events the runs could not be projected again: the same
    # answer proves it came from the cache.
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DELETE FROM events WHERE run_id = ANY($1)", run_ids)
    finally:
        await conn.close()
    again = await client.get(f"/v1/threads/{thread}/messages")
    assert again.content == first.content
