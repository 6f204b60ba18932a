"""ops/nginx/replay.conf in front of two `agent-replay serve` processes: streams go through live.

nginx's read timeout is compressed to 2 s and the replicas' heartbeat to
0.3 s, so an idle minute in production is a few seconds here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import settings_for
from tests.ops.scrape import scrape, value
from tests.stream.wire import SseReader
from tests.support.proxy import nginx_in_front
from tests.support.servers import serve_in_process, serve_subprocess

READ_TIMEOUT_SECONDS = 2
HEARTBEAT_SECONDS = 0.3


@dataclass
class Replica:
    base: str
    process: Any


@dataclass
class Proxied:
    proxy: str
    replicas: list[Replica]


@contextlib.contextmanager
def _proxied(database_url: str) -> Iterator[Proxied]:
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_HEARTBEAT_SECONDS": str(HEARTBEAT_SECONDS),
        "REPLAY_METRICS_PUBLIC": "true",
    }
    with (
        serve_subprocess(env) as (a, process_a),
        serve_subprocess(env) as (b, process_b),
        nginx_in_front(
            [a.removeprefix("http://"), b.removeprefix("http://")],
            read_timeout=f"{READ_TIMEOUT_SECONDS}s",
        ) as proxy,
    ):
        yield Proxied(proxy, [Replica(a, process_a), Replica(b, process_b)])


@pytest.fixture(scope="module")
def proxied(database_url: str) -> Iterator[Proxied]:
    with _proxied(database_url) as running:
        yield running


@pytest.fixture
async def http(proxied: Proxied) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=proxied.proxy, timeout=30) as client:
        yield client


def _delta(i: int) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"part {i} " + "x" * 600}


async def _read_until(
    chunks: AsyncIterator[bytes], reader: SseReader, done: Any, seconds: float = 15
) -> None:
    async with asyncio.timeout(seconds):
        while not done():
            reader.feed(await anext(chunks))


async def test_nginx_when_a_run_is_live_then_its_first_event_arrives_before_the_run_ends(
    http: httpx.AsyncClient,
) -> None:
    run = "/v1/runs/ngx-live"
    await http.post(f"{run}/events", json={"events": [_delta(1)]})
    reader = SseReader()
    async with http.stream(
        "GET", f"{run}/stream", headers={"accept-encoding": "gzip", "x-request-id": "ngx-req-1"}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        # Never compressed (gzip would hold events back until it has a block).
        assert "content-encoding" not in response.headers
        # The caller's request id went through to the replica and back.
        assert response.headers["x-request-id"] == "ngx-req-1"
        chunks = response.aiter_bytes()
        await _read_until(chunks, reader, lambda: len(reader.events) == 1)
        assert (await http.get(run)).json()["closed"] is False
        await http.post(f"{run}/events", json={"events": [_delta(2)]})
        await _read_until(chunks, reader, lambda: len(reader.events) == 2)
        assert (await http.get(run)).json()["closed"] is False
        await http.post(f"{run}/close", headers={"Content-Type": "application/json"})
        async for data in chunks:
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == [1, 2]
    # JSON answers are compressed, so the stream's exemption is the configuration's doing.
    page = await http.get(f"{run}/events", headers={"accept-encoding": "gzip"})
    assert page.headers["content-encoding"] == "gzip"
    assert [e["seq"] for e in page.json()["events"]] == [1, 2]


async def test_nginx_when_a_stream_idles_past_the_read_timeout_then_heartbeats_keep_it_open(
    http: httpx.AsyncClient,
) -> None:
    run = "/v1/runs/ngx-idle"
    await http.post(f"{run}/events", json={"events": [_delta(1)]})
    reader = SseReader()
    async with http.stream("GET", f"{run}/stream") as response:
        chunks = response.aiter_bytes()
        await _read_until(chunks, reader, lambda: len(reader.events) == 1)
        idle_from = time.monotonic()
        heartbeats = 2 * READ_TIMEOUT_SECONDS / HEARTBEAT_SECONDS - 2
        # Idle for twice nginx's read timeout and as many heartbeats as that takes
        # unloaded, counting them as they cross it. On a loaded machine heartbeats come
        # late (each is due a heartbeat's time after the one before, and a late wake-up
        # delays every one after it), so the wait is for both, not for a time alone;
        # nginx ending the stream (a gap past its read timeout) fails the test.
        await _read_until(
            chunks,
            reader,
            lambda: (
                time.monotonic() - idle_from > 2 * READ_TIMEOUT_SECONDS
                and reader.comments >= heartbeats
            ),
            seconds=30,
        )
        assert len(reader.events) == 1
        assert reader.comments >= 2 * READ_TIMEOUT_SECONDS / HEARTBEAT_SECONDS - 2
        # The same response still delivers, live.
        await http.post(f"{run}/events", json={"events": [_delta(2)], "close": True})
        async for data in chunks:
            reader.feed(data)
    assert [seq for seq, _ in reader.events] == [1, 2]


async def _produce(http: httpx.AsyncClient, run: str, count: int) -> list[dict[str, Any]]:
    """Append `count` chunks one by one, retrying each safely (expected_seq) until acknowledged."""
    sent = []
    for seq in range(1, count + 1):
        chunk = _delta(seq)
        body = {"events": [chunk], "expected_seq": seq, "close": seq == count}
        deadline = time.monotonic() + 20
        while True:
            try:
                r = await http.post(f"{run}/events", json=body)
                if r.status_code == 200:
                    break
                # A proxy error while a replica dies: the retry is safe.
                assert r.status_code in (502, 503, 504), r.text
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the append never went through"
            await asyncio.sleep(0.05)
        sent.append(chunk)
        await asyncio.sleep(0.01)
    return sent


async def test_nginx_when_the_serving_replica_is_killed_mid_stream_then_resumes_once_elsewhere(
    database_url: str,
) -> None:
    with _proxied(database_url) as proxied:
        async with httpx.AsyncClient(base_url=proxied.proxy, timeout=30) as http:
            run = "/v1/runs/ngx-kill"
            total = 200
            await http.put(run, headers={"Content-Type": "application/json"})
            producer = asyncio.create_task(_produce(http, run, total))
            reader = SseReader()
            connections = 0
            killed: Replica | None = None
            async with asyncio.timeout(60):
                while True:
                    connections += 1
                    headers = (
                        {} if reader.last_id is None else {"last-event-id": str(reader.last_id)}
                    )
                    try:
                        async with http.stream("GET", f"{run}/stream", headers=headers) as response:
                            if response.status_code == 204:
                                break  # closed, and we have it all
                            assert response.status_code == 200
                            async for data in response.aiter_bytes():
                                reader.feed(data)
                                if killed is None and len(reader.events) >= 30:
                                    killed = await _kill_the_serving_one(proxied)
                        break  # the stream ended by itself: the run is closed and delivered
                    except (httpx.RemoteProtocolError, httpx.ReadError):
                        assert killed is not None, "the stream broke with no replica killed"
            sent = await producer
    assert killed is not None and killed.process.poll() is not None
    assert connections >= 2
    seqs = [seq for seq, _ in reader.events]
    assert seqs == list(range(1, total + 1))
    assert [json.loads(text) for _, text in reader.events] == sent


async def _kill_the_serving_one(proxied: Proxied) -> Replica:
    """SIGKILL the replica holding the follower (its own /metrics says so)."""
    for replica in proxied.replicas:
        async with httpx.AsyncClient(base_url=replica.base, timeout=10) as direct:
            samples = await scrape(direct)
        if value(samples, "replay_stream_followers") == 1:
            os.kill(replica.process.pid, signal.SIGKILL)
            replica.process.wait(10)
            return replica
    raise AssertionError("no replica reports the follower")


async def test_nginx_when_a_token_rides_in_the_url_then_its_access_log_blanks_it(
    database_url: str, tmp_path: Path
) -> None:
    secret = "nginx-token-secret-0123456789abcdef-0123456789"
    settings = settings_for(database_url, api_keys="k-nginx-admin", token_secret=secret)
    async with serve_in_process(settings) as running:
        upstream = running.base_url.removeprefix("http://")
        with nginx_in_front([upstream], home=tmp_path) as proxy:
            async with httpx.AsyncClient(base_url=proxy) as client:
                minted = await client.post(
                    "/v1/tokens", json={"thread_id": "t-ng"},
                    headers={"Authorization": "Bearer k-nginx-admin"},
                )  # fmt: skip
                token = minted.json()["token"]
                ok = await client.get("/v1/runs", params={"thread_id": "t-ng", "token": token})
                # The token between other parameters, and a refused one.
                mid = await client.get(f"/v1/runs?limit=5&token={token}&thread_id=t-ng")
                bad = await client.get("/v1/runs", params={"token": token[:-3] + "xyz"})
            log = (tmp_path / "access.log").read_text()
    assert (ok.status_code, mid.status_code, bad.status_code) == (200, 200, 401)
    assert log.count("token=REDACTED") == 3, log
    assert "limit=5&token=REDACTED&thread_id=t-ng" in log, log
    assert token not in log and token[:40] not in log and token[-20:] not in log
