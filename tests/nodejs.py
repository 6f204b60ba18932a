"""Running a script of the Node harness (tests/node) with a deadline."""

from __future__ import annotations

import asyncio
from pathlib import Path


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
