"""Durable Streams writes with keys set: `DELETE /v1/stream` removes only streams a
`PUT /v1/stream` made, and a fork stays on its source's thread."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from tests.access.conftest import ADMIN, bearer, log_digest, mint
from tests.conftest import settings_for
from tests.support.servers import Running, serve_in_process

APPEND = bearer("k-append")
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
async def paced(database_url: str) -> AsyncIterator[Running]:
    """Keys set, and a demo agent slow enough to be caught mid-answer."""
    settings = settings_for(
        database_url,
        api_keys="k-admin, k-append:append, k-read:read",
        token_secret="stream-writes-secret-0123456789abcdef-0123456789",
        demo_delay_seconds=0.3,
    )
    async with serve_in_process(settings) as running:
        yield running


async def _events(conn: asyncpg.Connection, run_id: str) -> object:
    return await conn.fetchrow(
        "SELECT count(*), md5(coalesce(string_agg(seq || chunk, ',' ORDER BY seq), ''))"
        " FROM events WHERE run_id = $1",
        run_id,
    )


async def _until(conn: asyncpg.Connection, query: str, run_id: str, why: str) -> None:
    """Until `query` about the run holds (polled, with a deadline)."""
    deadline = time.monotonic() + 60
    while not await conn.fetchval(query, run_id):
        assert time.monotonic() < deadline, why
        await asyncio.sleep(0.02)


async def _until_mid_answer(conn: asyncpg.Connection, run_id: str) -> None:
    """Until the hosted run has streamed some of its answer and is still open."""
    await _until(
        conn,
        "SELECT last_seq >= 3 AND closed_at IS NULL FROM runs WHERE run_id = $1",
        run_id,
        "the hosted run never got going",
    )


async def _until_closed(conn: asyncpg.Connection, run_id: str) -> None:
    await _until(
        conn, "SELECT closed_at IS NOT NULL FROM runs WHERE run_id = $1", run_id, "never closed"
    )


async def test_delete_through_streams_of_runs_not_made_by_put_is_refused_and_they_stay_whole(
    paced: Running, database_url: str
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        async with httpx.AsyncClient(base_url=paced.base_url, timeout=30) as client:
            opened = await client.post(
                "/v1/runs/plain-open/events",
                headers=ADMIN,
                json={"events": [{"type": "RUN_STARTED", "threadId": "t", "runId": "plain-open"}]},
            )
            closed = await client.post(
                "/v1/runs/plain-closed/events",
                headers=ADMIN,
                json={"events": [{"type": "A"}], "close": True},
            )
            forked = await client.post(
                "/v1/runs/plain-closed/fork", headers=ADMIN, json={"run_id": "plain-fork"}
            )
            # A PUT of an existing run's id: the run is seen as a stream, not made by it.
            seen = await client.put("/v1/stream/plain-open", headers={**ADMIN, **JSON_TYPE})
            hosted = await client.post(
                "/v1/agents/demo/runs",
                headers=ADMIN,
                json={"threadId": "t-h", "runId": "hosted-live",
                      "messages": [{"id": "u", "role": "user", "content": "hi"}]},
            )  # fmt: skip
            assert [r.status_code for r in (opened, closed, forked, seen, hosted)] == [
                200, 200, 201, 200, 201,
            ]  # fmt: skip
            await _until_mid_answer(conn, "hosted-live")
            plain = ("plain-open", "plain-closed", "plain-fork")
            before = {r: await _events(conn, r) for r in plain}
            for run_id in ("plain-open", "plain-closed", "plain-fork", "hosted-live"):
                for credential in (APPEND, ADMIN):
                    refused = await client.delete(f"/v1/stream/{run_id}", headers=credential)
                    assert refused.status_code == 409, (run_id, refused.text)
                    assert refused.json()["error"]["code"] == "run_not_deletable"
            for run_id, events in before.items():
                assert await _events(conn, run_id) == events
            # The hosted run was never cut: it goes on to its end, all of it kept.
            await _until_closed(conn, "hosted-live")
            status = await conn.fetchval("SELECT status FROM runs WHERE run_id = 'hosted-live'")
            assert status == "finished"
            # A stream PUT made is still the append key's to delete.
            made = await client.put("/v1/stream/made-by-put", headers={**APPEND, **JSON_TYPE})
            assert made.status_code == 201
            deleted = await client.delete("/v1/stream/made-by-put", headers=APPEND)
            assert deleted.status_code == 204
            missing = await client.delete("/v1/stream/never-was", headers=APPEND)
            assert missing.status_code == 404
    finally:
        await conn.close()


async def test_append_through_streams_of_a_hosted_run_follows_the_run_api(
    paced: Running, database_url: str
) -> None:
    # What the run API lets an append key do to a run, the stream API does, and no more.
    async with httpx.AsyncClient(base_url=paced.base_url, timeout=30) as client:
        r = await client.post(
            "/v1/agents/demo/runs",
            headers=ADMIN,
            json={"threadId": "t-h2", "runId": "hosted-two",
                  "messages": [{"id": "u", "role": "user", "content": "hi"}]},
        )  # fmt: skip
        assert r.status_code == 201
        conn = await asyncpg.connect(database_url)
        try:
            await _until_closed(conn, "hosted-two")
            before = await _events(conn, "hosted-two")
            via_runs = await client.post(
                "/v1/runs/hosted-two/events", headers=APPEND, json={"events": [{"type": "A"}]}
            )
            via_stream = await client.post(
                "/v1/stream/hosted-two", headers={**APPEND, **JSON_TYPE}, json=[{"type": "A"}]
            )
            assert (via_runs.status_code, via_stream.status_code) == (409, 409)
            assert await _events(conn, "hosted-two") == before
        finally:
            await conn.close()


async def test_fork_through_streams_naming_another_thread_is_refused_and_bob_stays_unread(
    paced: Running, database_url: str
) -> None:
    async with httpx.AsyncClient(base_url=paced.base_url, timeout=30) as client:
        secret = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "bob's secret"}
        r = await client.post(
            "/v1/runs/bob-run/events",
            headers=ADMIN,
            json={"events": [{"type": "RUN_STARTED", "threadId": "bob", "runId": "bob-run"},
                             secret]},
        )  # fmt: skip
        assert r.status_code == 200
        alice = bearer(await mint(client, thread_id="alice"))
        conn = await asyncpg.connect(database_url)
        try:
            before = await log_digest(conn)
            hijack = await client.put(
                "/v1/stream/alice-fork",
                headers={**APPEND, **JSON_TYPE, "Stream-Forked-From": "/v1/stream/bob-run"},
                json=[{"type": "RUN_STARTED", "threadId": "alice", "runId": "alice-fork"}],
            )
            assert hijack.status_code == 409, hijack.text
            assert hijack.json()["error"]["code"] == "fork_thread_conflict"
            assert await log_digest(conn) == before
            # A fork with no RUN_STARTED is on bob's thread, and a later one does not move it.
            plain = await client.put(
                "/v1/stream/alice-fork-2",
                headers={**APPEND, **JSON_TYPE, "Stream-Forked-From": "/v1/stream/bob-run"},
            )
            assert plain.status_code == 201
            moved = await client.post(
                "/v1/stream/alice-fork-2",
                headers={**APPEND, **JSON_TYPE},
                json=[{"type": "RUN_STARTED", "threadId": "alice", "runId": "alice-fork-2"}],
            )
            assert moved.status_code in (200, 204)
            thread = await conn.fetchval("SELECT thread_id FROM runs WHERE run_id = 'alice-fork-2'")
            assert thread == "bob"
        finally:
            await conn.close()
        for path in ("/v1/runs/alice-fork-2/events", "/v1/threads/alice/messages",
                     "/v1/runs/alice-fork/events"):  # fmt: skip
            read = await client.get(path, headers=alice)
            assert "bob's secret" not in read.text, (path, read.text)
