"""Expired streams are deleted with their runs: by the service on its own
(REPLAY_DURABLE_SWEEP_SECONDS) and by `agent-replay prune --expired-streams`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import httpx
import pytest

from tests.audit.helpers import replay
from tests.conftest import settings_for
from tests.support.servers import serve_in_process

DEADLINE = 20.0
JSON = {"Content-Type": "application/json"}


async def _expire(database_url: str, *names: str) -> None:
    """Time passes for these streams: their TTL has run out."""
    conn = await asyncpg.connect(database_url)
    try:
        status = await conn.execute(
            "UPDATE streams SET touched_at = touched_at - ttl_seconds * interval '2 seconds'"
            " WHERE name = ANY($1::text[])",
            list(names),
        )
        assert status == f"UPDATE {len(names)}"
    finally:
        await conn.close()


@pytest.fixture
async def sweeping(database_url: str) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_for(database_url, durable_sweep_seconds=0.05)
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=30) as http,
    ):
        yield http


async def test_service_when_streams_expire_then_its_sweep_deletes_their_runs_only(
    sweeping: httpx.AsyncClient, database_url: str
) -> None:
    http = sweeping
    ttl = {**JSON, "Stream-TTL": "3600"}
    for name in ("sw-old", "sw-src", "sw-live"):
        put = await http.put(f"/v1/stream/{name}", headers=ttl, json=[{"n": 1}, {"n": 2}])
        assert put.status_code == 201
    fork = await http.put(
        "/v1/stream/sw-fork",
        headers={**JSON, "Stream-Forked-From": "/v1/stream/sw-src"},
    )
    assert fork.status_code == 201
    await _expire(database_url, "sw-old", "sw-src")
    assert (await http.get("/v1/stream/sw-old")).status_code == 404
    async with asyncio.timeout(DEADLINE):
        # No event says "the sweep ran": poll the run API until the run is gone.
        while (await http.get("/v1/runs/sw-old")).status_code != 404:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    # The expired source a fork reads is kept (404 as a stream) while the fork lives.
    assert (await http.get("/v1/stream/sw-src")).status_code == 404
    assert (await http.get("/v1/runs/sw-src")).status_code == 200
    read = await http.get("/v1/stream/sw-fork", params={"offset": "-1"})
    assert read.json() == [{"n": 1}, {"n": 2}]
    live = await http.get("/v1/stream/sw-live", params={"offset": "-1"})
    assert live.status_code == 200 and live.json() == [{"n": 1}, {"n": 2}]
    # The fork gone, the next pass takes the source.
    assert (await http.delete("/v1/stream/sw-fork")).status_code == 204
    async with asyncio.timeout(DEADLINE):
        while (await http.get("/v1/runs/sw-src")).status_code != 404:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
    again = await http.put("/v1/stream/sw-old", headers=JSON)
    assert again.status_code == 201 and again.headers["stream-next-offset"].startswith("0000")


async def test_prune_when_expired_streams_asked_then_dry_run_counts_and_run_deletes(
    client: httpx.AsyncClient, database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ttl = {**JSON, "Stream-TTL": "60"}
    for name, count in (("pr-old-a", 3), ("pr-old-b", 4), ("pr-live", 2)):
        put = await client.put(f"/v1/stream/{name}", headers=ttl, json=list(range(count)))
        assert put.status_code == 201
    await _expire(database_url, "pr-old-a", "pr-old-b")
    status, out, err = await replay(
        capsys, "prune", "--expired-streams", "--dry-run", "--database-url", database_url
    )
    assert status == 0, err
    assert "would delete 2 expired streams and 7 events" in out
    assert (await client.get("/v1/runs/pr-old-a")).status_code == 200
    status, out, err = await replay(
        capsys, "prune", "--expired-streams", "--database-url", database_url
    )
    assert status == 0, err
    assert "deleted 2 expired streams and 7 events" in out
    for gone in ("pr-old-a", "pr-old-b"):
        assert (await client.get(f"/v1/runs/{gone}")).status_code == 404
    assert (await client.get("/v1/stream/pr-live", params={"offset": "-1"})).json() == [0, 1]


async def test_prune_when_neither_date_nor_expired_streams_then_usage_error(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = await replay(capsys, "prune", "--database-url", database_url)
    assert status == 2 and "--expired-streams" in err
