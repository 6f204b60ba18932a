"""`@durable-streams/client` against two replicas: exactly once through a cut connection,
resume from the last offset on the other replica, live SSE and long-poll until close."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx

from tests.support.servers import serve_subprocess


def test_client_when_connection_cut_and_reader_moves_replica_then_every_message_once_in_order(
    durable_harness: Path, database_url: str
) -> None:
    env = {"REPLAY_DATABASE_URL": database_url}
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        run = subprocess.run(
            ["node", "replicas.mjs", a, b, "replicas-run"],
            cwd=durable_harness,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        report = json.loads(run.stdout.strip().splitlines()[-1])
        run_state = httpx.get(f"{a}/v1/runs/replicas-run").json()

    every = list(range(report["total"]))
    assert report["drops"] == 1  # the producer's retry went through a cut connection
    assert report["errors"] == []
    assert report["catchUpA"] == every  # the retried batch is stored once
    assert report["catchUpB"] == every
    assert report["sse"] == {"ids": every, "closed": True}
    assert report["longPoll"] == {"ids": every, "closed": True}
    # Killed mid-stream on A, resumed on B from the last offset: no gap, no duplicate.
    assert report["killed"]["ids"] + report["resumed"]["ids"] == every
    assert report["resumed"]["closed"] is True
    assert report["headClosed"] == "true"
    # The same log through the run API.
    assert (run_state["last_seq"], run_state["closed"]) == (report["total"], True)
