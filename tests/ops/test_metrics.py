"""`GET /metrics`: the counters, histograms and gauges move as real traffic goes through.

Counters are process-wide, so each test compares a scrape before with one after
its own traffic (nothing else runs in this module's service meanwhile).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import httpx
import pytest

from tests.conftest import settings_for
from tests.ops.scrape import Samples, delta, scrape, value
from tests.stream.wire import SseReader
from tests.support.servers import Running, serve_in_process


@pytest.fixture(scope="module")
async def service(database_url: str) -> AsyncIterator[Running]:
    settings = settings_for(
        database_url,
        metrics_public=True,
        heartbeat_seconds=1.0,
        lease_seconds=2.0,
        demo_delay_seconds=0.05,
    )
    async with serve_in_process(settings) as running:
        yield running


@pytest.fixture
async def http(service: Running) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=service.base_url, timeout=30) as client:
        yield client


def _chunks(n: int, message: str = "m") -> list[dict[str, object]]:
    return [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": f"d{i}"} for i in range(n)
    ]


async def _until(
    http: httpx.AsyncClient, check: Callable[[Samples], bool], seconds: float = 15
) -> Samples:
    """Scrape until `check` holds (or fail after `seconds`)."""
    deadline = time.monotonic() + seconds
    while True:
        samples = await scrape(http)
        if check(samples):
            return samples
        assert time.monotonic() < deadline, "the metrics never reached the expected state"
        await asyncio.sleep(0.05)


async def test_metrics_when_appends_accepted_and_refused_then_outcomes_events_and_durations_counted(
    http: httpx.AsyncClient,
) -> None:
    before = await scrape(http)
    ok = await http.post("/v1/runs/m-append/events", json={"events": _chunks(3)})
    assert ok.status_code == 200
    bad = await http.post(
        "/v1/runs/m-append/events",
        content=b"{not json",
        headers={"content-type": "application/json"},
    )
    assert bad.json()["error"]["code"] == "invalid_json"
    assert (
        await http.post("/v1/runs/m-append/close", headers={"Content-Type": "application/json"})
    ).status_code == 200
    closed = await http.post("/v1/runs/m-append/events", json={"events": _chunks(1)})
    assert closed.json()["error"]["code"] == "run_closed"
    after = await scrape(http)

    requests = "replay_append_requests_total"
    assert delta(before, after, requests, {"outcome": "ok"}) == 1
    assert delta(before, after, requests, {"outcome": "invalid_json"}) == 1
    assert delta(before, after, requests, {"outcome": "run_closed"}) == 1
    assert delta(before, after, "replay_events_appended_total") == 3
    # Only the acknowledged append is timed, from its request to its commit.
    assert delta(before, after, "replay_append_duration_seconds_count") == 1
    assert delta(before, after, "replay_append_duration_seconds_sum") > 0
    # One group of three events (the bare close committed no events).
    assert delta(before, after, "replay_group_commit_events_count") == 1
    assert delta(before, after, "replay_group_commit_events_sum") == 3
    assert delta(before, after, "replay_group_commit_events_bucket", {"le": "2.0"}) == 0
    assert delta(before, after, "replay_group_commit_events_bucket", {"le": "5.0"}) == 1


async def test_metrics_when_durable_streams_append_then_their_events_are_counted_too(
    http: httpx.AsyncClient,
) -> None:
    json_type = {"content-type": "application/json"}
    before = await scrape(http)
    created = await http.put("/v1/stream/m-ds", headers=json_type, json=_chunks(2))
    assert created.status_code == 201
    plain = await http.post("/v1/stream/m-ds", headers=json_type, json=_chunks(3))
    assert plain.status_code == 204
    guarded = await http.post(
        "/v1/stream/m-ds",
        headers={**json_type, "Producer-Id": "p1", "Producer-Epoch": "0", "Producer-Seq": "0"},
        json=_chunks(4),
    )
    assert guarded.status_code in (200, 204), guarded.text
    after = await scrape(http)
    assert delta(before, after, "replay_events_appended_total") == 9
    assert delta(before, after, "replay_group_commit_events_sum") == 9


async def test_metrics_when_requests_answered_then_counted_by_route_template_and_status(
    http: httpx.AsyncClient,
) -> None:
    await http.put("/v1/runs/m-route-1", headers={"Content-Type": "application/json"})
    before = await scrape(http)
    for run_id in ("m-route-1", "m-route-1", "m-route-missing"):
        await http.get(f"/v1/runs/{run_id}")
    after = await scrape(http)
    name = "replay_http_requests_total"
    route = {"method": "GET", "route": "/v1/runs/{run_id}"}
    assert delta(before, after, name, {**route, "status": "200"}) == 2
    assert delta(before, after, name, {**route, "status": "404"}) == 1
    # No series is keyed by a raw path (one per run id would grow without bound).
    assert not any(
        ("route", "/v1/runs/m-route-1") in labels for (sample, labels) in after if sample == name
    )


async def test_metrics_when_a_follower_streams_a_live_run_then_gauge_and_events_sent_move(
    http: httpx.AsyncClient,
) -> None:
    run = "/v1/runs/m-live"
    await http.post(f"{run}/events", json={"events": _chunks(5)})
    before = await scrape(http)
    reader = SseReader()
    async with http.stream("GET", f"{run}/stream") as response:
        chunks = response.aiter_bytes()
        while len(reader.events) < 5:
            reader.feed(await anext(chunks))
        during = await scrape(http)
        assert delta(before, during, "replay_stream_followers") == 1
        assert delta(before, during, "replay_stream_runs_followed") == 1
        await http.post(f"{run}/events", json={"events": _chunks(2), "close": True})
        async for data in chunks:
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, 8))
    after = await _until(
        http,
        lambda s: value(s, "replay_stream_followers") == value(before, "replay_stream_followers"),
    )
    # The five it read itself its task sent; the two committed while it waited caught
    # up, the commit wrote (agent_replay.stream.outlet).
    sent = "replay_stream_events_sent_total"
    assert delta(before, after, sent, {"by": "follower"}) == 5
    assert delta(before, after, sent, {"by": "commit"}) == 2
    assert delta(before, after, "replay_stream_follower_lag_events_count") >= 2
    # The follower read the first five itself; the two this process committed after
    # reached its channel from the committer, not from a read.
    buffered = "replay_stream_buffered_events_total"
    assert delta(before, after, buffered, {"source": "commit"}) == 2
    assert delta(before, after, buffered, {"source": "read"}) == 0
    assert delta(before, after, "replay_stream_reads", {"by": "follower"}) == 1
    assert delta(before, after, "replay_stream_reads", {"by": "channel"}) == 0


async def test_metrics_when_follower_catches_up_a_closed_run_then_lag_falls_by_page_to_zero(
    http: httpx.AsyncClient,
) -> None:
    # 2,500 events read a page (1,000) at a time: lag 1,500, then 500, then 0.
    run = "/v1/runs/m-catchup"
    await http.post(f"{run}/events", json={"events": _chunks(2500), "close": True})
    before = await scrape(http)
    reader = SseReader()
    async with http.stream("GET", f"{run}/stream") as response:
        async for data in response.aiter_bytes():
            reader.feed(data)
    assert len(reader.events) == 2500
    after = await scrape(http)
    lag = "replay_stream_follower_lag_events"
    assert delta(before, after, f"{lag}_count") == 3
    assert delta(before, after, f"{lag}_sum") == 2000
    assert delta(before, after, f"{lag}_bucket", {"le": "0.0"}) == 1
    assert delta(before, after, f"{lag}_bucket", {"le": "1000.0"}) == 2
    sent = "replay_stream_events_sent_total"
    assert delta(before, after, sent, {"by": "follower"}) == 2500
    assert delta(before, after, sent, {"by": "commit"}) == 0


async def test_metrics_when_scraped_then_listen_pools_and_process_collector_are_there(
    http: httpx.AsyncClient, service: Running
) -> None:
    samples = await scrape(http)
    assert value(samples, "replay_listen_connected") == 1
    pools = (
        ("log", service.settings.pool_size),
        ("commit", service.settings.commit_lanes + 1),
        ("audit", None),
    )
    for pool, most in pools:
        size = value(samples, "replay_db_pool_size", {"pool": pool})
        in_use = value(samples, "replay_db_pool_in_use", {"pool": pool})
        top = value(samples, "replay_db_pool_max_size", {"pool": pool})
        assert 0 <= in_use <= size <= top, (pool, in_use, size, top)
        if most is not None:
            assert top == most
    assert value(samples, "replay_db_pool_size", {"pool": "log"}) >= 1
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_cpu_seconds_total") > 0
    assert any(name == "python_info" for name, _ in samples)


async def test_metrics_when_a_hosted_run_is_driven_then_gauge_counts_it_until_it_ends(
    http: httpx.AsyncClient,
) -> None:
    before = await scrape(http)
    started = await http.post("/v1/agents/demo/runs", json={"threadId": "m-hosted"})
    assert started.status_code == 201
    run_id = started.json()["run_id"]
    await _until(http, lambda s: delta(before, s, "replay_hosted_runs") == 1)
    reader = SseReader()
    async with http.stream("GET", f"/v1/runs/{run_id}/stream") as response:
        async for data in response.aiter_bytes():
            reader.feed(data)
    assert json.loads(reader.events[-1][1])["type"] == "RUN_FINISHED"
    await _until(http, lambda s: delta(before, s, "replay_hosted_runs") == 0)


async def test_metrics_when_a_dead_drivers_lease_runs_out_then_reaped_counted(
    http: httpx.AsyncClient, database_url: str
) -> None:
    # A run leased by a process that no longer exists (as a kill -9 leaves it).
    assert (
        await http.put("/v1/runs/m-orphan", headers={"Content-Type": "application/json"})
    ).status_code == 201
    before = await scrape(http)
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute(
            "UPDATE runs SET lease_owner = 'gone:1/0', lease_expires_at = now() - interval '1s'"
            " WHERE run_id = 'm-orphan'"
        )
    finally:
        await conn.close()
    after = await _until(http, lambda s: delta(before, s, "replay_leases_reaped_total") >= 1)
    assert delta(before, after, "replay_leases_reaped_total") == 1
    run = (await http.get("/v1/runs/m-orphan")).json()
    assert (run["status"], run["closed"]) == ("interrupted", True)


async def _serve_and(
    database_url: str, check: Callable[[httpx.AsyncClient], Awaitable[None]], **settings: object
) -> None:
    async with (
        serve_in_process(settings_for(database_url, **settings)) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=30) as client,
    ):
        await check(client)


async def test_metrics_when_keys_set_and_not_public_then_401_without_key(database_url: str) -> None:
    async def check(client: httpx.AsyncClient) -> None:
        refused = await client.get("/metrics")
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "unauthorized"
        await scrape(client, authorization="Bearer k1")

    await _serve_and(database_url, check, api_keys="k1")


async def test_metrics_when_public_then_open_while_v1_still_needs_the_key(
    database_url: str,
) -> None:
    async def check(client: httpx.AsyncClient) -> None:
        await scrape(client)
        assert (await client.get("/v1/runs")).status_code == 401

    await _serve_and(database_url, check, api_keys="k1", metrics_public=True)
