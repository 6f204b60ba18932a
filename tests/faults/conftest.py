"""Fault tests: each on its own PostgreSQL cluster (tests/support/cluster.py), the service as
real `agent-replay serve` processes, producers that retry (agent_replay.client), followers that
resume with Last-Event-ID."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

import httpx
import pytest

from agent_replay import migrate
from agent_replay.client import Producer
from tests.stream.wire import NdjsonReader, SseReader
from tests.support.cluster import Cluster, running_cluster
from tests.support.servers import serve_subprocess

DATABASE = "replay"
# The service promises an answer within this long while the database is away.
ANSWER_BOUND = 5.0


async def produce_until(producer: Producer, run_id: str, stop: asyncio.Event) -> list[Any]:
    """Chunks at a steady pace until told to stop, then the run closed; every one it sent."""
    sent: list[Any] = []
    while not stop.is_set():
        c = chunk(run_id, len(sent) + 1)
        producer.submit(c)
        sent.append(c)
        await asyncio.sleep(0.01)
    await producer.close_run()
    return sent


def prepare(pg: Cluster) -> str:
    """The service's database on `pg`, migrated; its URL."""
    url = pg.create_database(DATABASE)
    migrate.upgrade(url)
    return url


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as pg:
        yield pg


@pytest.fixture
def database(cluster: Cluster) -> str:
    return prepare(cluster)


def service_env(url: str, **extra: str) -> dict[str, str]:
    return {
        "REPLAY_DATABASE_URL": url,
        "REPLAY_HEARTBEAT_SECONDS": "0.5",
        "REPLAY_STREAM_RECHECK_SECONDS": "1",
        **extra,
    }


@contextlib.contextmanager
def replica(
    url: str, log: IO[bytes] | None = None, **extra: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`agent-replay serve` on the cluster, as its own process (killable, signalable)."""
    with serve_subprocess(service_env(url, **extra), log_file=log) as running:
        yield running


@pytest.fixture
def server_log() -> Iterator[IO[bytes]]:
    """The replicas' stderr, printed when a test fails (pytest shows captured output)."""
    with tempfile.TemporaryFile() as f:
        yield f
        f.seek(0)
        tail = f.read()[-8000:].decode(errors="replace")
        print("--- agent-replay serve log (tail) ---\n" + tail)


def chunk(run_id: str, n: int) -> dict[str, Any]:
    """The n-th chunk of a test run: its content says which it is."""
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}", "delta": f"<{n}>"}


async def stored(http: httpx.AsyncClient, base: str, run_id: str) -> list[tuple[int, Any]]:
    """The run's whole log as (seq, chunk), read page by page."""
    out: list[tuple[int, Any]] = []
    after = 0
    while True:
        r = await http.get(
            f"{base}/v1/runs/{run_id}/events", params={"after": after, "limit": 10_000}
        )
        r.raise_for_status()
        page = r.json()
        out += [(e["seq"], e["chunk"]) for e in page["events"]]
        if page["next_after"] is None or not page["events"]:
            return out
        after = page["next_after"]


@dataclass
class Follower:
    """A client that follows one run to its end, resuming with Last-Event-ID after any
    cut (a 503, a refused connection, a stream ended by a replica shutting down)."""

    bases: list[str]
    run_id: str
    events: list[tuple[int, Any]] = field(default_factory=list)
    connects: int = 0
    heartbeats: int = 0
    # Streams that broke while open (as opposed to ending cleanly, or failing to connect).
    broken: int = 0
    # NDJSON (`?format=ndjson`, blank-line heartbeats) instead of SSE.
    ndjson: bool = False

    async def run(self, http: httpx.AsyncClient) -> None:
        turn = 0
        while True:
            base = self.bases[turn % len(self.bases)]
            headers = {"Last-Event-ID": str(self.events[-1][0])} if self.events else {}
            reader: SseReader | NdjsonReader = NdjsonReader() if self.ndjson else SseReader()
            streaming = False
            try:
                params = {"format": "ndjson"} if self.ndjson else {}
                async with http.stream(
                    "GET", f"{base}/v1/runs/{self.run_id}/stream", headers=headers, params=params
                ) as response:
                    if response.status_code == 204:
                        return  # closed, and we have it all
                    if response.status_code != 200:
                        await response.aread()
                        assert response.status_code == 503, response.text
                        await asyncio.sleep(0.2)
                        continue
                    self.connects += 1
                    streaming = True
                    async for data in response.aiter_bytes():
                        for seq, text in reader.feed(data):
                            self.events.append((seq, json.loads(text)))
                    self.heartbeats += _heartbeats(reader)
                    # A clean end: the run is closed and delivered, or the replica is
                    # going away (then the next request resumes after our last id).
                    if await self._complete(http, base):
                        return
            except httpx.TransportError:
                self.heartbeats += _heartbeats(reader)
                self.broken += streaming
                turn += 1  # this replica is gone or going: try the next one
                await asyncio.sleep(0.1)

    async def _complete(self, http: httpx.AsyncClient, base: str) -> bool:
        with contextlib.suppress(httpx.TransportError):
            r = await http.get(f"{base}/v1/runs/{self.run_id}")
            if r.status_code == 200:
                run = r.json()
                return (
                    bool(run["closed"])
                    and bool(self.events)
                    and (self.events[-1][0] == run["last_seq"])
                )
        return False


def _heartbeats(reader: SseReader | NdjsonReader) -> int:
    return reader.comments if isinstance(reader, SseReader) else reader.blank_lines


@contextlib.asynccontextmanager
async def following(
    http: httpx.AsyncClient, followers: list[Follower]
) -> AsyncIterator[list[asyncio.Task[None]]]:
    tasks = [asyncio.create_task(f.run(http)) for f in followers]
    try:
        yield tasks
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@contextlib.asynccontextmanager
async def closing(producers: list[Producer]) -> AsyncIterator[list[Producer]]:
    try:
        yield producers
    finally:
        for p in producers:
            await p.aclose()


async def until(condition: Callable[[], Awaitable[bool]], seconds: float = 30.0) -> None:
    """Wait for a condition another process (or task) makes true; fail past `seconds`."""
    async with asyncio.timeout(seconds):
        while not await condition():  # noqa: ASYNC110 (no event crosses processes)
            await asyncio.sleep(0.05)


async def probe_appends(
    http: httpx.AsyncClient, base: str, results: list[dict[str, Any]], stop: asyncio.Event
) -> None:
    """An append (with expected_seq) and /readyz, /healthz, every 100 ms; each answer kept."""
    seq = 1
    while not stop.is_set():
        started = time.monotonic()
        entry: dict[str, Any] = {"at": started}
        try:
            r = await http.post(
                f"{base}/v1/runs/probe/events",
                json={"events": [chunk("probe", seq)], "expected_seq": seq},
                timeout=ANSWER_BOUND,
            )
            entry.update(
                status=r.status_code,
                body=r.json(),
                retry_after=r.headers.get("Retry-After"),
                took=time.monotonic() - started,
            )
            if r.status_code == 200:
                seq += 1
            ready = await http.get(f"{base}/readyz", timeout=ANSWER_BOUND)
            health = await http.get(f"{base}/healthz", timeout=ANSWER_BOUND)
            entry.update(ready=ready.status_code, health=health.status_code, end=time.monotonic())
        except httpx.TimeoutException as exc:
            entry.update(status="timeout", error=repr(exc))
        results.append(entry)
        await asyncio.sleep(0.1)
