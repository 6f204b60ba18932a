"""Debian's nginx in front of replicas, running ops/nginx/replay.conf as committed.

Only what must differ per test run is rewritten: the upstream servers, the
listening port, and (to compress an idle minute into seconds) the read
timeout. Everything nginx writes lives in a temporary folder. nginx missing
fails the test (`ops/test` installs it as root on Debian).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.servers import free_port

CONF = Path(__file__).resolve().parents[2] / "ops" / "nginx" / "replay.conf"


def nginx_binary() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if found is None:
        pytest.fail("nginx is needed for the proxy tests (apt-get install nginx)")
    return found


def render(upstreams: Sequence[str], port: int, *, read_timeout: str | None = None) -> str:
    """replay.conf with these upstreams ("127.0.0.1:8001") in each of its upstream blocks (each
    keeps its own server options), this port, this read timeout."""
    text = CONF.read_text()

    def servers(block: re.Match[str]) -> str:
        body = block.group(2)
        template = re.search(r"^\s*server \S+(.*);$", body, re.M)
        assert template is not None, f"upstream {block.group(1)} lists no server"
        listed = "\n".join(f"    server {u}{template.group(1)};" for u in upstreams)
        rest = re.sub(r"^\s*server \S+.*;\n?", "", body, flags=re.M)
        return f"upstream {block.group(1)} {{\n{listed}\n{rest.rstrip(chr(10))}\n}}"

    text, blocks = re.subn(r"upstream (\w+) \{\n(.*?)\n\}", servers, text, flags=re.S)
    assert blocks >= 1, "replay.conf has no upstream block"
    text, listens = re.subn(
        r"^(\s*)listen \S+;", rf"\g<1>listen 127.0.0.1:{port};", text, flags=re.M
    )
    assert listens == 1
    if read_timeout is not None:
        text, n = re.subn(r"proxy_read_timeout \S+;", f"proxy_read_timeout {read_timeout};", text)
        assert n == 1
    return text


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


@contextmanager
def nginx_in_front(
    upstreams: Sequence[str], *, read_timeout: str | None = None, home: Path | None = None
) -> Iterator[str]:
    """nginx proxying to `upstreams` with replay.conf; yields its base URL. Everything it
    writes goes to `home` (else a temporary folder): replay.conf's access log to
    `home/access.log`."""
    binary = nginx_binary()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="replay-nginx-") as scratch:
        prefix = home or Path(scratch)
        conf = render(upstreams, port, read_timeout=read_timeout)
        (prefix / "replay.conf").write_text(conf.replace("/var/log/nginx/", f"{prefix}/"))
        # As root, workers would otherwise run as nobody, who cannot enter this folder.
        user = "user root;\n" if os.geteuid() == 0 else ""
        temp = "\n".join(
            f"    {kind}_temp_path {prefix}/{kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        (prefix / "nginx.conf").write_text(
            f"{user}worker_processes 1;\npid {prefix}/nginx.pid;\n"
            f"error_log {prefix}/error.log info;\n"
            "events { worker_connections 1024; }\n"
            f"http {{\n    access_log {prefix}/access.log;\n{temp}\n"
            f"    include {prefix}/replay.conf;\n}}\n"
        )
        proc = subprocess.Popen(
            [binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 15
            while not _answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    log = (
                        (prefix / "error.log").read_text()
                        if (prefix / "error.log").exists()
                        else ""
                    )
                    raise RuntimeError(f"nginx did not start: {err}\n{log[-2000:]}")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr:
                proc.stderr.close()
