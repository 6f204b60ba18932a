"""The zero-setup default: `agent-replay serve` with no database URL runs its own PostgreSQL."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from tests.support.servers import serve_subprocess


def test_serve_without_database_url_then_embedded_postgres_and_data_survives_restart(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REPLAY_DATABASE_URL"}
    env["REPLAY_DATA_DIR"] = str(tmp_path / "home")
    chunk = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "kept \ud83d"}
    with serve_subprocess(env, inherit=False) as (base, _):
        assert httpx.get(f"{base}/readyz", timeout=10).json()["status"] == "ready"
        body = json.dumps({"events": [chunk]})  # ASCII escapes: the lone surrogate survives
        r = httpx.post(
            f"{base}/v1/runs/emb-1/events",
            content=body,
            timeout=10,
            headers={"Content-Type": "application/json"},
        )
        assert r.json()["last_seq"] == 1
    assert (tmp_path / "home" / "pg" / "PG_VERSION").exists()
    with serve_subprocess(env, inherit=False) as (base, _):
        events = httpx.get(f"{base}/v1/runs/emb-1/events", timeout=10).json()["events"]
        assert [e["chunk"] for e in events] == [chunk]
