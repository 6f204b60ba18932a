"""REPLAY_READ_DATABASE_URL against a real hot standby (tests/support/cluster.py), paused or not.

A paused standby is the worst lag there is: it answers, but with the log as
it was. Readers must still get every event exactly once (what the standby
lacks comes from the primary), and the standby must really serve what it has
(the `replay_replica_reads_total` counter says who served each read).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from agent_replay import migrate
from agent_replay.archive.commands import export_to
from tests.conftest import settings_for
from tests.ops.scrape import delta, scrape
from tests.stream.wire import SseReader
from tests.support.cluster import Cluster, running_cluster
from tests.support.servers import serve_in_process


@pytest.fixture(scope="module")
def primary() -> Iterator[Cluster]:
    with running_cluster() as cluster:
        yield cluster


async def _sql(cluster: Cluster, query: str, *args: object, database: str = "replay") -> Any:
    conn = await asyncpg.connect(cluster.url(database))
    try:
        return await conn.fetchval(query, *args)
    finally:
        await conn.close()


async def caught_up(standby: Cluster, primary: Cluster, seconds: float = 30) -> None:
    """Until the standby has replayed everything the primary has written so far."""
    target = await _sql(primary, "SELECT pg_current_wal_lsn()::text")
    deadline = time.monotonic() + seconds
    while True:
        behind = await _sql(
            standby, "SELECT pg_wal_lsn_diff($1::text::pg_lsn, pg_last_wal_replay_lsn())", target
        )
        if behind is not None and float(behind) <= 0:
            return
        assert time.monotonic() < deadline, f"the standby is still {behind} bytes behind"
        await asyncio.sleep(0.02)


async def pause_replay(standby: Cluster) -> None:
    """Stop applying WAL (still received): reads see the data as of now."""
    await _sql(standby, "SELECT pg_wal_replay_pause()")
    deadline = time.monotonic() + 30
    while await _sql(standby, "SELECT pg_get_wal_replay_pause_state()") != "paused":
        assert time.monotonic() < deadline, "replay did not pause"
        await asyncio.sleep(0.02)


async def resume_replay(standby: Cluster) -> None:
    await _sql(standby, "SELECT pg_wal_replay_resume()")


@pytest.fixture(scope="module")
async def urls(primary: Cluster) -> AsyncIterator[tuple[str, str, Cluster]]:
    conn = await asyncpg.connect(primary.url())
    try:
        await conn.execute('CREATE DATABASE "replay"')
    finally:
        await conn.close()
    url = primary.url("replay")
    await asyncio.to_thread(migrate.upgrade, url)
    standby = await asyncio.to_thread(primary.standby)
    await caught_up(standby, primary)
    yield url, standby.url("replay"), standby


@pytest.fixture(scope="module")
async def http(urls: tuple[str, str, Cluster]) -> AsyncIterator[httpx.AsyncClient]:
    url, read_url, _ = urls
    settings = settings_for(url, read_database_url=read_url, metrics_public=True)
    async with (
        serve_in_process(settings) as running,
        httpx.AsyncClient(base_url=running.base_url, timeout=60) as client,
    ):
        yield client


@pytest.fixture
async def paused(urls: tuple[str, str, Cluster], primary: Cluster) -> AsyncIterator[Cluster]:
    """The standby caught up, then paused for the test; resumed after."""
    _, _, standby = urls
    await caught_up(standby, primary)
    await pause_replay(standby)
    yield standby
    await resume_replay(standby)


def _chunks(first: int, count: int) -> list[dict[str, Any]]:
    return [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"d{i}"}
        for i in range(first, first + count)
    ]


async def _append(
    http: httpx.AsyncClient, run_id: str, first: int, count: int, **extra: Any
) -> None:
    r = await http.post(
        f"/v1/runs/{run_id}/events",
        json={"events": _chunks(first, count), "expected_seq": first, **extra},
    )
    assert r.status_code == 200, r.text


async def _stream(http: httpx.AsyncClient, run_id: str, **headers: str) -> list[tuple[int, str]]:
    reader = SseReader()
    async with asyncio.timeout(60):
        async with http.stream("GET", f"/v1/runs/{run_id}/stream", headers=headers) as response:
            assert response.status_code == 200
            async for data in response.aiter_bytes():
                reader.feed(data)
    return reader.events


def _deltas(events: list[tuple[int, str]]) -> list[str]:
    return [json.loads(text)["delta"] for _, text in events]


async def test_replica_when_standby_paused_mid_run_then_readers_get_every_event_once(
    http: httpx.AsyncClient, urls: tuple[str, str, Cluster], primary: Cluster
) -> None:
    _, _, standby = urls
    # 2,500 events on the standby (pages of 1,000), then 1,700 it never sees.
    await _append(http, "rr-paused", 1, 2500)
    await caught_up(standby, primary)
    await pause_replay(standby)
    try:
        await _append(http, "rr-paused", 2501, 1700, close=True)
        before = await scrape(http)
        events = await _stream(http, "rr-paused")
        after = await scrape(http)
        assert [seq for seq, _ in events] == list(range(1, 4201))
        assert _deltas(events) == [f"d{i}" for i in range(1, 4201)]
        reads = "replay_replica_reads_total"
        # Pages of 1,000: two whole from the standby; the third is its last 500, completed
        # by the primary. (Further pages come from the primary: topped up, or read ahead by
        # the run's live reader, depending on timing.)
        assert delta(before, after, reads, {"served": "standby"}) == 2
        assert delta(before, after, reads, {"served": "topped_up"}) >= 1
        # A resume in the middle, and one past everything the standby has.
        middle = await _stream(http, "rr-paused", **{"last-event-id": "1999"})
        assert [seq for seq, _ in middle] == list(range(2000, 4201))
        late = await _stream(http, "rr-paused", **{"last-event-id": "3000"})
        assert [seq for seq, _ in late] == list(range(3001, 4201))
    finally:
        await resume_replay(standby)


async def test_replica_when_run_is_not_on_the_standby_yet_then_primary_serves_it(
    http: httpx.AsyncClient, paused: Cluster
) -> None:
    await _append(http, "rr-new", 1, 30, close=True)
    before = await scrape(http)
    events = await _stream(http, "rr-new")
    after = await scrape(http)
    assert [seq for seq, _ in events] == list(range(1, 31))
    assert delta(before, after, "replay_replica_reads_total", {"served": "primary"}) == 1
    run = (await http.get("/v1/runs/rr-new")).json()
    assert (run["last_seq"], run["closed"]) == (30, True)


async def test_replica_when_paused_then_a_live_follower_still_gets_new_events_at_once(
    http: httpx.AsyncClient, paused: Cluster
) -> None:
    await _append(http, "rr-live", 1, 5)
    reader = SseReader()
    async with http.stream("GET", "/v1/runs/rr-live/stream") as response:
        chunks = response.aiter_bytes()
        async with asyncio.timeout(30):
            while len(reader.events) < 5:
                reader.feed(await anext(chunks))
            await _append(http, "rr-live", 6, 3)
            while len(reader.events) < 8:
                reader.feed(await anext(chunks))
            await _append(http, "rr-live", 9, 1, close=True)
            async for data in chunks:
                reader.feed(data)
    assert [seq for seq, _ in reader.events] == list(range(1, 10))


async def test_replica_when_paused_then_event_pages_and_exports_are_whole(
    http: httpx.AsyncClient, urls: tuple[str, str, Cluster], primary: Cluster
) -> None:
    _, _, standby = urls
    await _append(http, "rr-pages", 1, 600)
    await caught_up(standby, primary)
    await pause_replay(standby)
    try:
        await _append(http, "rr-pages", 601, 400, close=True)
        seqs: list[int] = []
        after: int | None = 0
        while after is not None:
            page = (
                await http.get("/v1/runs/rr-pages/events", params={"after": after, "limit": 250})
            ).json()
            seqs += [e["seq"] for e in page["events"]]
            after = page["next_after"]
        assert seqs == list(range(1, 1001))
        export = await http.get("/v1/runs/rr-pages/export")
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert lines[0]["format"] == "agent-replay.export"
        assert [line["seq"] for line in lines[1:]] == list(range(1, 1001))
        # The listing comes from the standby: as of its pause, the run is still open there.
        listed = (await http.get("/v1/runs", params={"limit": 500})).json()["runs"]
        (summary,) = [r for r in listed if r["run_id"] == "rr-pages"]
        assert summary["status"] == "running"
    finally:
        await resume_replay(standby)


async def test_replica_when_paused_then_exports_read_the_standby_and_top_up_from_the_primary(
    http: httpx.AsyncClient, urls: tuple[str, str, Cluster], primary: Cluster, tmp_path: Path
) -> None:
    url, read_url, standby = urls
    await _append(http, "rr-export", 1, 700)
    await caught_up(standby, primary)
    await pause_replay(standby)
    try:
        await _append(http, "rr-export", 701, 300, close=True)
        reads = "replay_replica_reads_total"
        before = await scrape(http)
        export = await http.get("/v1/runs/rr-export/export")
        after = await scrape(http)
        lines = [json.loads(line) for line in export.text.splitlines()]
        assert [line["seq"] for line in lines[1:]] == list(range(1, 1001))
        assert [line["chunk"]["delta"] for line in lines[1:]] == [f"d{i}" for i in range(1, 1001)]
        # One read: the standby's 700 events, the primary's 300 after them.
        assert delta(before, after, reads, {"served": "topped_up"}) == 1
        assert delta(before, after, reads, {"served": "primary"}) == 0
        # The command line's export, given the standby too, writes the same file.
        out = tmp_path / "rr-export.jsonl"
        written = await export_to(
            url, run_id="rr-export", thread_id=None, out=out, read_url=read_url
        )
        assert written == 1000
        assert out.read_bytes() == export.content
        # So does the transcript, which reads the export back.
        transcript = await http.get("/v1/runs/rr-export/transcript", params={"format": "json"})
        assert transcript.status_code == 200
        assert "d1000" in transcript.text
    finally:
        await resume_replay(standby)


async def test_replica_when_standby_is_down_then_reads_fall_back_to_the_primary(
    http: httpx.AsyncClient, urls: tuple[str, str, Cluster], primary: Cluster
) -> None:
    _, _, standby = urls
    await _append(http, "rr-down", 1, 1200, close=True)
    await caught_up(standby, primary)
    await asyncio.to_thread(standby.stop, "immediate")
    try:
        before = await scrape(http)
        events = await _stream(http, "rr-down")
        after = await scrape(http)
        assert [seq for seq, _ in events] == list(range(1, 1201))
        assert delta(before, after, "replay_replica_reads_total", {"served": "primary"}) >= 1
        # A listing, which the standby serves when it answers, too.
        listed = (await http.get("/v1/runs", params={"limit": 500})).json()["runs"]
        (summary,) = [r for r in listed if r["run_id"] == "rr-down"]
        assert (summary["event_count"], summary["closed_at"] is not None) == (1200, True)
    finally:
        await asyncio.to_thread(standby.start)
