"""A database that hangs (every PostgreSQL process stopped with SIGSTOP: connections stay
open, nothing answers, as in a partition): appends still answer within 5 s with a 503,
/readyz is 503 while /healthz is 200, and a retry at the same expected_seq stores the
batch once after the database wakes up."""

from __future__ import annotations

import asyncio
from typing import IO

import httpx

from agent_replay.client import Ack, Producer
from tests.faults.conftest import chunk, replica, stored
from tests.support.cluster import Cluster

ANSWER_BOUND = 5.0


async def test_database_hung_then_append_503_within_5s_and_retry_stores_once(
    cluster: Cluster, database: str, server_log: IO[bytes]
) -> None:
    with replica(database, server_log) as (base, _):
        async with httpx.AsyncClient(timeout=ANSWER_BOUND) as http:
            first = await http.post(
                f"{base}/v1/runs/hung/events", json={"events": [chunk("hung", 1)]}
            )
            assert first.status_code == 200
            batch = [chunk("hung", 2), chunk("hung", 3)]
            await asyncio.to_thread(cluster.freeze)
            try:
                # httpx raises if no answer comes within the bound: that would be a hang.
                r = await http.post(
                    f"{base}/v1/runs/hung/events", json={"events": batch, "expected_seq": 2}
                )
                assert r.status_code == 503, r.text
                assert r.json()["error"]["code"] == "unavailable"
                assert r.headers["Retry-After"] == "1"
                assert (await http.get(f"{base}/readyz")).status_code == 503
                assert (await http.get(f"{base}/healthz")).status_code == 200
            finally:
                await asyncio.to_thread(cluster.thaw)
            # Perhaps committed once the database woke, perhaps not: the retry settles it.
            async with Producer(base, "hung", next_seq=2) as producer:
                assert await producer.send(*batch) == Ack(2, 3)
            log = await stored(http, base, "hung")
    assert [c for _, c in log] == [chunk("hung", 1), *batch]
