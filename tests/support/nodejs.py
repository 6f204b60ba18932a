"""Running a script of the Node harness (tests/node) with a deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.relay import Relay


async def node_script(
    harness: Path, script: str, *args: str, deadline: float
) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `node script args...`; killed at the deadline."""
    proc = await asyncio.create_subprocess_exec(
        "node", script, *args, cwd=harness,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with asyncio.timeout(deadline):
            out, err = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, out.decode(), err.decode()


async def cut_on_cue(
    harness: Path,
    script: str,
    *args: str,
    relay: Relay,
    cue: bytes,
    cuts: int = 1,
    wait_cue: float = 90,
    deadline: float = 120,
) -> tuple[str, str]:
    """(stdout, stderr) of `node script args...`, a script that prints `cue` whenever its
    connection through `relay` should be cut: each time, the relay cuts it (it must have one
    open) and the script is told `cut` on stdin; `cuts` times, then it must exit 0."""
    proc = await asyncio.create_subprocess_exec(
        "node", script, *args, cwd=harness,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None and proc.stderr is not None
    try:
        for _ in range(cuts):
            line = await asyncio.wait_for(proc.stdout.readline(), wait_cue)
            assert line == cue, line + (await proc.stderr.read() if line != cue else b"")
            assert relay.cut() >= 1  # the script's stream, open at its cue
            proc.stdin.write(b"cut\n")
            await proc.stdin.drain()
        out, err = await asyncio.wait_for(proc.communicate(), deadline)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode(), err.decode()
