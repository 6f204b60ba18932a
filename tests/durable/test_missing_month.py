"""A Durable Streams write whose month of `events` has no partition yet makes it and
commits, as the group commit does (agent_replay.log.partitions): a PUT with a body and a
guarded (producer) append run their own transactions, outside the group commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import asyncpg
import httpx
import pytest

from agent_replay.log import partitions
from tests.conftest import settings_for
from tests.support.pg import Databases
from tests.support.servers import serve_in_process

JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def own_database(databases: Databases) -> AsyncIterator[str]:
    """A database of this test's own: its partitions are dropped at will."""
    url = await databases.clone()
    yield url
    await databases.drop(url)


async def test_create_with_body_when_this_month_has_no_partition_then_made_and_stored(
    own_database: str,
) -> None:
    async with serve_in_process(settings_for(own_database)) as running:
        this_month = partitions.name_of(partitions.month_of(datetime.now(UTC)))
        conn = await asyncpg.connect(own_database)
        try:
            # Made ahead when the service opened its log; gone as if nobody had.
            await conn.execute(f"DROP TABLE {this_month}")
            async with httpx.AsyncClient(base_url=running.base_url, timeout=30) as http:
                made = await http.put(
                    "/v1/stream/month-put", content=b'[{"a":1},{"a":2}]', headers=JSON
                )
                assert made.status_code == 201, made.text
                read = await http.get("/v1/stream/month-put", params={"offset": "-1"})
            assert read.json() == [{"a": 1}, {"a": 2}]
            stored = await conn.fetchval(
                f"SELECT sum(n) FROM {this_month} WHERE run_id = 'month-put'"
            )
            assert stored == 2
        finally:
            await conn.close()


async def test_guarded_append_when_runs_month_has_no_partition_then_made_and_stored(
    own_database: str,
) -> None:
    async with (
        serve_in_process(settings_for(own_database)) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=30) as http,
    ):
        assert (await http.put("/v1/stream/month-prod", headers=JSON)).status_code == 201
        conn = await asyncpg.connect(own_database)
        try:
            # The run (no events yet) of a month nobody made a partition for.
            await conn.execute(
                "UPDATE runs SET run_month = '2032-07-01' WHERE run_id = 'month-prod'"
            )
            # Stream-Seq takes the guarded path (its own transaction), not the group commit.
            producer = {
                "Producer-Id": "p",
                "Producer-Epoch": "0",
                "Producer-Seq": "0",
                "Stream-Seq": "0001",
            }
            reply = await http.post(
                "/v1/stream/month-prod", content=b'[{"b":1}]', headers={**JSON, **producer}
            )
            assert reply.status_code == 200, reply.text
            again = await http.post(
                "/v1/stream/month-prod", content=b'[{"b":1}]', headers={**JSON, **producer}
            )
            assert again.status_code == 204  # the retry is a duplicate: stored once
            read = await http.get("/v1/stream/month-prod", params={"offset": "-1"})
            assert read.json() == [{"b": 1}]
            count = await conn.fetchval(
                "SELECT sum(n) FROM events_2032_07 WHERE run_id = 'month-prod'"
            )
            assert count == 1
        finally:
            await conn.close()
