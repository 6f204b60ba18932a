"""The service over a real socket: uvicorn on loopback, in this process or another."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import IO, Any

import httpx
import uvicorn

from agent_replay.api.app import create_app
from agent_replay.config import Settings


@dataclass
class Running:
    base_url: str
    settings: Settings


@asynccontextmanager
async def serve_in_process(settings: Settings) -> AsyncIterator[Running]:
    """The service: uvicorn in this event loop, on a free loopback port."""
    async with serve_asgi(create_app(settings, migrate_on_start=False)) as base_url:
        yield Running(base_url, settings)


@asynccontextmanager
async def serve_asgi(app: Any) -> AsyncIterator[str]:
    """Any ASGI app on a free loopback port, in this event loop; yields its base URL."""
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def serve_subprocess(
    env: Mapping[str, str],
    port: int | None = None,
    *,
    inherit: bool = True,
    log_level: str = "warning",
    log_file: IO[bytes] | None = None,
    args: Sequence[str] = (),
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`agent-replay serve` as its own process (for multi-process and kill -9 tests).

    Its log goes to `log_file` when given (a pipe nobody reads would fill and
    stall the server), else only its last words are kept, for a failed start.
    `args`: more `agent-replay serve` options (`--workers 2`).
    Without the drain (REPLAY_DRAIN_SECONDS=0) unless `env` asks for it: the SIGTERM that
    stops a test's server ends its hosted runs at once, as tests/faults/test_drain.py's don't.
    """
    port = port or free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agent_replay.cli",
            "serve",
            "--port",
            str(port),
            "--log-level",
            log_level,
            *args,
        ],
        # inherit=False: exactly `env` (a test that must not see REPLAY_DATABASE_URL).
        env={"REPLAY_DRAIN_SECONDS": "0", **(os.environ if inherit else {}), **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE if log_file is None else log_file,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise RuntimeError(f"agent-replay serve did not start: {err[-2000:]}")
        time.sleep(0.05)
    try:
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stderr:
            proc.stderr.close()


@dataclass(frozen=True)
class Replicas:
    """Two `agent-replay serve` processes sharing one database: their base URLs."""

    a: str
    b: str


@contextmanager
def serve_replicas(database_url: str, extra: Mapping[str, str] | None = None) -> Iterator[Replicas]:
    """Two replicas on `database_url`, heartbeats every second (idle followers see them).

    `extra`: more settings for both (API keys, ...).
    """
    env = {"REPLAY_DATABASE_URL": database_url, "REPLAY_HEARTBEAT_SECONDS": "1", **(extra or {})}
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield Replicas(a, b)
