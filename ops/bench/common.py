"""Shared bits for the benchmarks: a scratch database, a server process, percentiles."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent_replay import migrate  # noqa: E402


def command(root: Path, *args: str) -> tuple[list[str], dict[str, str]]:
    """`agent-replay ARGS` as checkout `root`'s code runs it (this venv), and the environment
    that makes its package the one imported: a baseline's, not this checkout's. A checkout
    from before the package's rename (`service/cli.py`) runs as it did then, from its top."""
    if (root / "service" / "cli.py").exists():
        return [sys.executable, "-m", "service.cli", *args], {}
    return [sys.executable, "-m", "agent_replay.cli", *args], {"PYTHONPATH": str(root / "service")}


def is_checkout(root: Path) -> bool:
    return (root / "service" / "agent_replay" / "cli.py").exists() or (
        root / "service" / "cli.py"
    ).exists()


SERVER = os.environ.get("REPLAY_BENCH_DATABASE_URL", "postgresql://root@127.0.0.1:5432/postgres")


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pids: list[int]) -> float:
    """CPU time so far (user + system) of these processes, from /proc (0 for one gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / _TICKS


def backends(database: str) -> list[int]:
    """The PostgreSQL backends connected to `database` (their process title names it)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if title.startswith(b"postgres: ") and f" {database} ".encode() in title:
            pids.append(int(entry.name))
    return pids


def _with_db(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + name))


@contextmanager
def scratch_database(root: Path | None = None) -> Iterator[str]:
    """A freshly migrated database, dropped afterwards; `root`: migrated by another
    checkout's code (its own head, e.g. a baseline's), in this venv."""
    name = f"replay_bench_{uuid.uuid4().hex[:8]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(_with_db(SERVER, "postgres"))
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(admin(f'CREATE DATABASE "{name}"'))
    url = _with_db(SERVER, name)
    try:
        if root is None:
            migrate.upgrade(url)
        else:
            argv, code_env = command(root, "migrate")
            subprocess.run(
                argv,
                env={**os.environ, **code_env, "REPLAY_DATABASE_URL": url},
                cwd=root,
                check=True,
                stdout=subprocess.DEVNULL,
            )
        yield url
    finally:
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def healthy(proc: subprocess.Popen[bytes], base: str, seconds: float = 30) -> bool:
    """Whether the server `proc` at `base` answered /healthz 200 before it exited or timed out."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                return True
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)


@contextmanager
def server_process(
    url: str, port: int | None = None, root: Path | None = None, **env: str
) -> Iterator[str]:
    """`agent-replay serve` on `url`; `root`: another checkout's code (this venv), e.g. a
    baseline."""
    port = port or free_port()
    argv, code_env = command(root or ROOT, "serve", "--port", str(port), "--log-level", "warning")
    proc = subprocess.Popen(
        argv,
        env={**os.environ, **code_env, "REPLAY_DATABASE_URL": url, **env},
        cwd=root or ROOT,
    )
    base = f"http://127.0.0.1:{port}"
    if not healthy(proc, base):
        proc.kill()
        raise RuntimeError("server did not start")
    try:
        yield base
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[Any], grace: float = 10) -> None:
    """SIGTERM, `grace` seconds to exit, then SIGKILL."""
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def checkpoint(url: str) -> None:
    """Start a phase with the previous phase's dirty pages written out."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()


def write_json(path: str | None, figures: dict[str, Any]) -> None:
    """A script's figures and ratios as one JSON object (`--json FILE`), when asked for.

    NaN and infinities (a percentile of nothing) are written as null.
    """
    if path:
        Path(path).write_text(json.dumps(_finite(figures), indent=2, sort_keys=True) + "\n")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


class RawPoster:
    """Keep-alive POSTs over a few raw connections (httpx would cost more than the server)."""

    def __init__(self, port: int, connections: int = 16) -> None:
        self._port = port
        self._free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = (
            asyncio.Queue()
        )
        self._n = connections

    async def open(self) -> None:
        for _ in range(self._n):
            self._free.put_nowait(await asyncio.open_connection("127.0.0.1", self._port))

    async def post(self, path: str, body: bytes, content_type: str = "application/json") -> bytes:
        return await self.request("POST", path, body, content_type=content_type)

    async def request(
        self,
        method: str,
        path: str,
        body: bytes = b"",
        headers: str = "",
        content_type: str = "application/json",
    ) -> bytes:
        """Send `body` (`headers`: more header lines, each ending in CRLF); returns the
        answer's body (empty for 204). Not 2xx raises."""
        reader, writer = await self._free.get()
        writer.write(
            f"{method} {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\n"
            f"{headers}Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        head = await reader.readuntil(b"\r\n\r\n")
        length = re.search(rb"(?i)content-length: (\d+)", head)
        if length:
            answer = await reader.readexactly(int(length.group(1)))
        elif re.search(rb"(?i)transfer-encoding: chunked", head):
            answer = b""
            while size := int((await reader.readuntil(b"\r\n"))[:-2], 16):
                answer += (await reader.readexactly(size + 2))[:-2]
            await reader.readuntil(b"\r\n")
        else:
            answer = b""
        self._free.put_nowait((reader, writer))
        if not head.startswith(b"HTTP/1.1 2"):
            raise RuntimeError(head.decode() + answer.decode())
        return answer

    async def close(self) -> None:
        while not self._free.empty():
            self._free.get_nowait()[1].close()
