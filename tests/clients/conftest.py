"""Two service processes on one database, with the demo agent paced like a model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.nodejs import node_script
from tests.support.servers import serve_subprocess

DEADLINE = 120.0


@dataclass
class Replicas:
    a: str
    b: str

    @property
    def a_port(self) -> int:
        return int(self.a.rsplit(":", 1)[1])


@pytest.fixture(scope="module")
def replicas(database_url: str) -> Iterator[Replicas]:
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_HEARTBEAT_SECONDS": "1",
        # Slow enough that a client can leave mid-answer, fast enough for CI.
        "REPLAY_DEMO_DELAY_SECONDS": "0.02",
        "REPLAY_AGENTS": json.dumps(
            {
                "approve": "python:tests.clients.agents:approval",
                "paused": "python:tests.clients.agents:paused",
            }
        ),
    }
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield Replicas(a, b)


async def run_node(harness: Path, script: str, *args: str) -> Any:
    """Run a harness script; its last stdout line is its JSON result."""
    code, out, err = await node_script(harness, script, *args, deadline=DEADLINE)
    assert code == 0, err[-6000:]
    return json.loads(out.strip().splitlines()[-1])
