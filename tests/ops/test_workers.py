"""`agent-replay serve --workers N`: processes on one port, joined as replicas are."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.pg import Databases
from tests.support.servers import serve_subprocess

DEADLINE = 30.0


async def _pid_of(client: httpx.AsyncClient) -> int:
    """The worker behind `client`'s keep-alive connection."""
    answer = await client.get("/healthz")
    assert answer.status_code == 200
    pid: int = answer.json()["pid"]
    return pid


async def _client_on(
    base: str, avoid: frozenset[int] = frozenset()
) -> tuple[httpx.AsyncClient, int]:
    """A keep-alive client whose connection a worker outside `avoid` serves (a worker
    still starting answers nothing: new connections until one does, or the deadline)."""
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        client = httpx.AsyncClient(base_url=base, timeout=10)
        pid = await _pid_of(client)
        if pid not in avoid:
            return client, pid
        await client.aclose()
    pytest.fail(f"for {DEADLINE:g} s every new connection went to workers {sorted(avoid)}")


async def _stopped_cleanly(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the parent: every worker ends, and so does it, cleanly."""
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(proc.wait, DEADLINE) == 0


async def test_serve_when_two_workers_then_both_answer_and_a_follower_gets_the_others_appends(
    databases: Databases,
) -> None:
    # An unmigrated database and --migrate: the parent migrates once, before any worker
    # starts (two workers migrating side by side would race on alembic's version row).
    url = await databases.empty()
    try:
        env = {"REPLAY_DATABASE_URL": url}
        with serve_subprocess(env, args=["--workers", "2", "--migrate"]) as (base, proc):
            follower, follower_pid = await _client_on(base)
            appender, appender_pid = await _client_on(base, avoid=frozenset({follower_pid}))
            assert proc.pid not in (follower_pid, appender_pid)
            started = await appender.post(
                "/v1/runs/w-1/events", json={"events": [{"type": "RUN_STARTED"}]}
            )
            assert started.status_code == 200
            seen: list[int] = []
            async with follower.stream(
                "GET", "/v1/runs/w-1/stream", params={"format": "ndjson"}
            ) as stream:
                assert stream.status_code == 200
                for i in range(2, 31):
                    delta = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": str(i)}
                    answer = await appender.post(
                        "/v1/runs/w-1/events", json={"events": [delta], "close": i == 30}
                    )
                    assert answer.json()["last_seq"] == i
                async with asyncio.timeout(DEADLINE):
                    async for line in stream.aiter_lines():
                        if line.strip():
                            seen.append(int(orjson.loads(line)["id"]))
            assert seen == list(range(1, 31))
            # Both connections stayed on their workers all along.
            assert (await _pid_of(follower), await _pid_of(appender)) == (
                follower_pid,
                appender_pid,
            )
            await follower.aclose()
            await appender.aclose()
            await _stopped_cleanly(proc)
    finally:
        await databases.drop(url)


async def test_serve_when_workers_on_the_embedded_database_then_the_parent_runs_it_for_all(
    tmp_path: Path,
) -> None:
    # No URL: the parent starts the embedded cluster and migrates it once; both workers
    # use it; it stops after the last worker.
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    env["REPLAY_DATA_DIR"] = str(tmp_path)
    with serve_subprocess(env, inherit=False, args=["--workers", "2"]) as (base, proc):
        first, first_pid = await _client_on(base)
        second, second_pid = await _client_on(base, avoid=frozenset({first_pid}))
        body = {"events": [{"type": "RUN_STARTED"}, {"type": "RUN_FINISHED"}], "close": True}
        assert (await first.post("/v1/runs/e-1/events", json=body)).status_code == 200
        read = await second.get("/v1/runs/e-1/events")
        assert [e["seq"] for e in read.json()["events"]] == [1, 2]
        assert (await _pid_of(second)) == second_pid
        await first.aclose()
        await second.aclose()
        assert (tmp_path / "pg" / "postmaster.pid").exists()
        await _stopped_cleanly(proc)
    assert not (tmp_path / "pg" / "postmaster.pid").exists()


def test_serve_when_workers_not_a_positive_number_then_refused_before_starting() -> None:
    for bad in ("0", "-1", "two", "65"):
        done = subprocess.run(
            [sys.executable, "-m", "agent_replay.cli", "serve", "--workers", bad],
            capture_output=True,
            text=True,
            timeout=DEADLINE,
        )
        assert done.returncode == 2
        assert "not a whole number from 1 to 64" in done.stderr
