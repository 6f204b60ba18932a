"""Shared test helpers: the CLI in-process, database fingerprints, thread setup."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from agent_replay import cli
from agent_replay.log import EventLog
from tests.audit.data import every_part, failing, run_input, simple

_TABLES = {
    "runs": "SELECT * FROM runs ORDER BY run_id",
    "events": "SELECT * FROM events ORDER BY run_id, seq",
    "run_projections": "SELECT run_id, normalize, messages FROM run_projections ORDER BY 1, 2",
}


async def fingerprint(url: str) -> dict[str, str]:
    """A digest of every row of every table: equal digests, unchanged database."""
    conn = await asyncpg.connect(url)
    try:
        return {
            name: hashlib.sha256(repr([tuple(r) for r in await conn.fetch(q)]).encode()).hexdigest()
            for name, q in _TABLES.items()
        }
    finally:
        await conn.close()


async def replay(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`replay ARGV` in a worker thread (it runs its own event loop): (status, stdout, stderr)."""
    capsys.readouterr()
    status = await asyncio.to_thread(cli.main, list(argv))
    out, err = capsys.readouterr()
    return status, out, err


async def store(log: EventLog, run_id: str, chunks: Sequence[dict[str, Any]], **run: Any) -> None:
    close = run.pop("close", True)
    await log.create_run(run_id, **run)
    await log.append(run_id, chunks, close=close)


async def store_thread(log: EventLog, thread_id: str) -> list[str]:
    """Three runs: every part type (closed), an error (closed), an open one."""
    a, b, c = f"{thread_id}-a", f"{thread_id}-b", f"{thread_id}-c"
    await store(log, a, every_part(a, thread_id), thread_id=thread_id, agent="weather",
                metadata={"user": "ana", "n": 1.5},
                input=run_input(a, thread_id, "Weather in Paris?"))  # fmt: skip
    await store(log, b, failing(b, thread_id), thread_id=thread_id, agent="weather",
                input=run_input(b, thread_id, "Try again", "please", history=1))  # fmt: skip
    await store(log, c, simple(c, thread_id, "still going"), thread_id=thread_id, close=False,
                input=run_input(c, thread_id, "And tomorrow?", history=2))  # fmt: skip
    return [a, b, c]


async def store_thread_at(database_url: str, thread_id: str) -> list[str]:
    """`store_thread` through a log of its own, closed after (a module fixture's setup)."""
    log = await EventLog.open(database_url)
    try:
        return await store_thread(log, thread_id)
    finally:
        await log.close()


# Blocking file calls, kept out of async test bodies.
def read(path: Path) -> bytes:
    return path.read_bytes()


def write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


_EVENT = re.compile(rb'(\{"run_id":"([^"]+)","seq":([0-9]+),"received_at":"[^"]*","hash":")'
                    rb'([0-9a-f]{64})(","chunk":)(.*)\}')  # fmt: skip


def rechain(data: bytes) -> bytes:
    """An export's lines with every hash written anew from the chunks as they now stand, as
    someone editing a file would to hide the edit from the chain: the file's other checks
    are then what refuses it. Computed here from the documented definition, not the service's."""
    heads: dict[bytes, bytes] = {}
    out = []
    for line in data.split(b"\n"):
        match = _EVENT.fullmatch(line)
        if match is not None:
            start, run_id, seq, _, middle, chunk = match.groups()
            previous = heads.get(run_id, bytes(32))
            head = hashlib.sha256(previous + int(seq).to_bytes(8, "big") + chunk).digest()
            heads[run_id] = head
            line = start + head.hex().encode() + middle + chunk + b"}"
        out.append(line)
    return b"\n".join(out)
