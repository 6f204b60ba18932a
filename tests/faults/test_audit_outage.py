"""Audit reads (the log's, through `LogStore`) while PostgreSQL is stopped: run listings,
run and thread messages, transcripts and exports answer `503 unavailable` with
Retry-After, promptly, never a 500; once the database is back they answer again by
themselves (the pool's dead connections are replaced, no restart)."""

from __future__ import annotations

import asyncio
import time
from typing import IO

import httpx

from tests.faults.conftest import replica, until
from tests.support.cluster import Cluster

ANSWER_BOUND = 5.0
THREAD = "t-audit"
RUN = "audit-1"

# One of each family of audit endpoint; the first ones reach the database first of all.
AUDIT_READS = [
    "/v1/runs",
    f"/v1/runs?thread_id={THREAD}&status=finished",
    f"/v1/threads/{THREAD}/messages",
    f"/v1/threads/{THREAD}/transcript",
    f"/v1/threads/{THREAD}/transcript?format=json",
    f"/v1/runs/{RUN}/transcript?format=html",
    f"/v1/runs/{RUN}/export",
    f"/v1/runs/{RUN}/messages",
    f"/v1/runs/{RUN}/events?type=TEXT_MESSAGE_CONTENT",
]


def _chunks() -> list[dict[str, object]]:
    ids = {"threadId": THREAD, "runId": RUN}
    return [
        {"type": "RUN_STARTED", **ids},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hello"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "RUN_FINISHED", **ids},
    ]


async def test_database_stopped_then_audit_reads_answer_503_retry_after_and_heal(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    with replica(database, server_log) as (base, _):
        async with httpx.AsyncClient(base_url=base, timeout=ANSWER_BOUND) as http:
            r = await http.post(f"/v1/runs/{RUN}/events", json={"events": _chunks(), "close": True})
            assert r.status_code == 200, r.text
            # Answered while the database is up (and the log's pool holds connections,
            # which the stop below leaves dead).
            before = {path: await http.get(path) for path in AUDIT_READS}
            assert {p: r.status_code for p, r in before.items()} == dict.fromkeys(AUDIT_READS, 200)
            assert RUN in before["/v1/runs"].text

            await asyncio.to_thread(cluster.stop)
            # Twice each: the first use of a dead pooled connection, then a fresh connect.
            during = []
            for path in AUDIT_READS * 2:
                started = time.monotonic()
                r = await http.get(path)  # httpx raises past ANSWER_BOUND: a hang
                during.append((path, r, time.monotonic() - started))
            await asyncio.to_thread(cluster.start)

            async def all_answer() -> bool:
                answers = [(await http.get(path)).status_code for path in AUDIT_READS]
                return answers == [200] * len(AUDIT_READS)

            await until(all_answer)
            after = {path: await http.get(path) for path in AUDIT_READS}

    for path, r, took in during:
        assert r.status_code == 503, (path, r.status_code, r.text)
        assert r.json()["error"]["code"] == "unavailable", (path, r.text)
        assert r.headers.get("Retry-After") == "1", path
        assert "sqlalchemy" not in r.text.lower() and "asyncpg" not in r.text.lower()
        assert took < ANSWER_BOUND
    # The same answers as before the outage, byte for byte where nothing is generated per
    # request (a transcript's and an export's body carry no clock).
    for path in AUDIT_READS:
        assert after[path].status_code == 200, path
        assert after[path].content == before[path].content, path
