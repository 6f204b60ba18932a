"""An agent URL's credentials (`user:secret@`, `?api_key=secret`) and its headers' values
reach its upstream and nobody else: however the upstream fails, the run's RUN_ERROR, its
error field, /metrics and the service's log name it by scheme://host:port/path only.

Against a real `agent-replay serve` (its log read from its stderr) and upstreams on loopback
that fail each way: nothing listening, an HTTP 500 whose page echoes the request it got
(query string and headers), an event that is not JSON, an answer that is not HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from agent_replay.agents.wire import upstream_name
from tests.agents.conftest import follow
from tests.support.servers import free_port, serve_subprocess

SECRET = "secret"
HEADERS = {"X-Api-Key": f"{SECRET}-header"}

Script = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


async def _echo_500(head: bytes, writer: asyncio.StreamWriter) -> None:
    page = b"<h1>Internal error</h1><pre>" + head + b"</pre>"
    writer.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n")
    writer.write(b"Content-Length: %d\r\n\r\n" % len(page) + page)


async def _not_json(head: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
    writer.write(b'data: {"type": "RUN_STARTED", "echo": "' + head.split(b"\r\n")[0] + b"\n\n")


async def _not_http(head: bytes, writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTQ/9 what " + head.split(b"\r\n")[0] + b"\r\n\r\n")


@asynccontextmanager
async def _upstream(script: Script) -> AsyncIterator[int]:
    """A loopback server that reads one request and runs `script` on its head; its port."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            await script(head, writer)
            await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


def _url(port: int) -> str:
    return f"http://user:{SECRET}@127.0.0.1:{port}/agent?api_key={SECRET}&v=1#{SECRET}"


async def test_agent_url_with_credentials_when_its_upstream_fails_then_no_reader_or_log_sees_them(
    database_url: str, tmp_path: Path
) -> None:
    log_path = tmp_path / "replay.log"
    async with (
        _upstream(_echo_500) as echo,
        _upstream(_not_json) as bad_event,
        _upstream(_not_http) as bad_answer,
    ):
        agents = {
            "refused": {"url": _url(free_port()), "headers": HEADERS},
            "echo-500": {"url": _url(echo), "headers": HEADERS},
            "not-json": {"url": _url(bad_event), "headers": HEADERS},
            "not-http": {"url": _url(bad_answer), "headers": HEADERS},
        }
        env = {
            "REPLAY_DATABASE_URL": database_url,
            "REPLAY_AGENTS": json.dumps(agents),
            "REPLAY_LOG_FORMAT": "text",
        }
        with (
            log_path.open("wb") as log_file,
            serve_subprocess(env, log_level="debug", log_file=log_file) as (base, _),
        ):
            async with httpx.AsyncClient(base_url=base, timeout=30) as http:
                said = {}
                for name in agents:
                    r = await http.post(f"/v1/agents/{name}/runs", json={"messages": []})
                    assert r.status_code == 201, r.text
                    run_id = r.json()["run_id"]
                    events = await follow(http, run_id)
                    assert events[-1]["type"] == "RUN_ERROR", events
                    run = (await http.get(f"/v1/runs/{run_id}")).json()
                    stored = (await http.get(f"/v1/runs/{run_id}/events")).text
                    said[name] = events[-1]["message"]
                    assert SECRET not in json.dumps(events) + json.dumps(run) + stored, name
                where = agents["refused"]["url"].split("@")[1].split("?")[0]
                assert f"cannot connect to upstream http://{where}:" in said["refused"]
                assert "HTTP 500" in said["echo-500"] and "[redacted]" in said["echo-500"]
                assert "not valid JSON" in said["not-json"]
                assert "malformed answer" in said["not-http"]
                metrics = await http.get("/metrics")
                assert metrics.status_code == 200 and SECRET not in metrics.text
    log_text = log_path.read_text()
    assert "replay.access" in log_text  # the log was written, and read whole
    assert SECRET not in log_text


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("http://u:p%40ss@h:8080/a/b?k=v#f", "http://h:8080/a/b"),
        ("https://[::1]:9/x?token=t", "https://[::1]:9/x"),
        ("http://h:notaport/x", "http://h/x"),
    ],
)
def test_upstream_name_when_url_has_userinfo_query_or_fragment_then_only_scheme_host_port_path(
    url: str, named: str
) -> None:
    assert upstream_name(url) == named
