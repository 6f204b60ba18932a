"""`agent-replay erase --thread ID [--reason TEXT]`: exit 0 with the tombstones (again: the
same ones), 1 for a thread with neither runs nor tombstones, 2 for bad input."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys

import pytest

from agent_replay.errors import Erased
from agent_replay.log import EventLog


def _erase(*args: str) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    return subprocess.run(
        [sys.executable, "-m", "agent_replay.cli", "erase", *args],
        capture_output=True,
        env=clean,
        timeout=120,
    )


async def test_erase_when_thread_has_runs_then_exit_0_tombstones_and_again_the_same(
    database_url: str,
) -> None:
    log = await EventLog.open(database_url)
    try:
        await log.create_run("cli-er-1", thread_id="cli-er")
        await log.append("cli-er-1", [{"type": "A", "n": i} for i in range(3)], close=True)
        first = _erase("--thread", "cli-er", "--reason", "asked", "--database-url", database_url)
        assert first.returncode == 0, first.stderr
        (line,) = first.stdout.decode().splitlines()
        tombstone = json.loads(line)
        assert (tombstone["run_id"], tombstone["events"], tombstone["reason"]) == (
            "cli-er-1",
            3,
            "asked",
        )
        assert tombstone["erased_by"] == f"cli:{getpass.getuser()}"
        assert b"1 run erased (3 events)" in first.stderr
        assert await log.find_run("cli-er-1") is None
        with pytest.raises(Erased):
            await log.create_run("cli-er-2", thread_id="cli-er")
        again = _erase("--thread", "cli-er", "--database-url", database_url)
        assert again.returncode == 0, again.stderr
        assert again.stdout == first.stdout
    finally:
        await log.close()


def test_erase_when_thread_unknown_then_exit_1_naming_it(database_url: str) -> None:
    done = _erase("--thread", "cli-er-none", "--database-url", database_url)
    assert done.returncode == 1 and done.stdout == b""
    assert b"cli-er-none" in done.stderr and b"Traceback" not in done.stderr


def test_erase_when_thread_missing_then_exit_2() -> None:
    assert _erase().returncode == 2
