"""Access lines and request ids, read from a real `agent-replay serve`'s stderr.

JSON lines (`REPLAY_LOG_FORMAT=json`) are parsed; text lines are checked for
the same facts. No line may carry a key or a token, wherever it was sent.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.stream.wire import SseReader
from tests.support.servers import serve_subprocess

KEY = "sk-live-7f3a9c1e5b"
TOKEN = "tok-8d2e4f6a0c"

# A server's base URL and the file its stderr goes to.
Server = tuple[str, Path]


@pytest.fixture(scope="module")
def json_server(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the module: each test finds its own lines by request id."""
    yield from _server(database_url, tmp_path_factory.mktemp("json-log"), "json")


@pytest.fixture
def text_server(database_url: str, tmp_path: Path) -> Iterator[Server]:
    yield from _server(database_url, tmp_path, "text")


def _server(database_url: str, folder: Path, fmt: str) -> Iterator[Server]:
    path = folder / "replay.log"
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_LOG_FORMAT": fmt,
        "REPLAY_API_KEYS": KEY,
        "REPLAY_HEARTBEAT_SECONDS": "1",
    }
    with (
        path.open("wb") as log_file,
        serve_subprocess(env, log_level="info", log_file=log_file) as (base, _),
    ):
        yield base, path


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _access(path: Path, request_id: str) -> list[dict[str, Any]]:
    return [
        line
        for line in _json_lines(path)
        if line["logger"] == "replay.access" and line.get("request_id") == request_id
    ]


AUTH = {"authorization": f"Bearer {KEY}"}


async def test_access_log_when_json_then_one_line_per_request_with_route_status_run_and_id(
    json_server: Server,
) -> None:
    base, path = json_server
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=AUTH) as http:
        r = await http.post(
            "/v1/runs/acc-1/events",
            json={"events": [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}]},
            headers={"x-request-id": "req-append-1"},
        )
        assert r.status_code == 200
        assert r.headers["x-request-id"] == "req-append-1"
        missing = await http.get("/v1/runs/acc-missing", headers={"x-request-id": "req-404"})
        assert missing.status_code == 404 and missing.headers["x-request-id"] == "req-404"
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    (line,) = _access(path, "req-append-1")
    assert line["level"] == "info"
    assert (line["method"], line["route"], line["status"]) == (
        "POST",
        "/v1/runs/{run_id}/events",
        200,
    )
    assert line["run_id"] == "acc-1" and line["path"] == "/v1/runs/acc-1/events"
    assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
    (nf,) = _access(path, "req-404")
    assert (nf["route"], nf["status"], nf["run_id"]) == ("/v1/runs/{run_id}", 404, "acc-missing")


async def test_access_log_when_no_or_bad_request_id_then_one_is_generated_and_echoed(
    json_server: Server,
) -> None:
    base, path = json_server
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        plain = await http.get("/favicon.ico")
        hostile = await http.get("/favicon.ico", headers={"x-request-id": "a b\tc" + "x" * 200})
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    ids = [plain.headers["x-request-id"], hostile.headers["x-request-id"]]
    for request_id in ids:
        assert re.fullmatch(r"[0-9a-f]{32}", request_id)
        (line,) = _access(path, request_id)
        assert (line["route"], line["status"]) == ("/favicon.ico", 200)
    assert ids[0] != ids[1]


async def test_access_log_when_a_stream_ends_then_its_line_has_the_whole_duration(
    json_server: Server,
) -> None:
    base, path = json_server
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=AUTH) as http:
        await http.post(
            "/v1/runs/acc-stream/events",
            json={"events": [{"type": "RUN_STARTED", "threadId": "t", "runId": "acc-stream"}]},
        )
        reader = SseReader()
        async with http.stream(
            "GET", "/v1/runs/acc-stream/stream", headers={"x-request-id": "req-stream"}
        ) as response:
            assert response.headers["x-request-id"] == "req-stream"
            chunks = response.aiter_bytes()
            while not reader.events:
                reader.feed(await anext(chunks))
            # Open: no line yet (it is written when the response ends).
            assert _access(path, "req-stream") == []
            await http.post(
                "/v1/runs/acc-stream/close", headers={"Content-Type": "application/json"}
            )
            async for data in chunks:
                reader.feed(data)
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    (line,) = _access(path, "req-stream")
    assert (line["route"], line["status"], line["run_id"]) == (
        "/v1/runs/{run_id}/stream",
        200,
        "acc-stream",
    )


async def test_access_log_when_key_and_token_sent_then_neither_is_ever_written(
    json_server: Server,
) -> None:
    base, path = json_server
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        await http.get("/v1/runs", headers={"authorization": f"Bearer {KEY}x"})  # a wrong key: 401
        await http.get(
            "/v1/runs/acc-tok/stream",
            params={"token": TOKEN, "offset": "-1", "api_key": KEY},
            headers={**AUTH, "x-request-id": "req-token"},
        )
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    text = path.read_text()
    assert KEY not in text and TOKEN not in text
    (line,) = _access(path, "req-token")
    # ?token= never reaches the log: it is taken out of the URL first (agent_replay.api.edge).
    assert line["path"] == "/v1/runs/acc-tok/stream?offset=-1&api_key=REDACTED"
    assert line["status"] == 404
    assert [entry["status"] for entry in _json_lines(path) if entry.get("route") == "/v1/runs"] == [
        401
    ]


async def test_access_log_when_text_then_readable_line_with_the_same_fields(
    text_server: Server,
) -> None:
    base, path = text_server
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=AUTH) as http:
        await http.put(
            "/v1/runs/acc-text",
            headers={"x-request-id": "req-text", "Content-Type": "application/json"},
        )
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    (line,) = [entry for entry in path.read_text().splitlines() if "request_id=req-text" in entry]
    assert line.startswith("INFO replay.access: PUT /v1/runs/{run_id} 201 ")
    assert " run_id=acc-text " in line and " status=201 " in line


async def test_access_log_when_health_probes_succeed_then_they_write_no_line(
    json_server: Server,
) -> None:
    base, path = json_server
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=AUTH) as http:
        for probe in ("/healthz", "/readyz", "/metrics"):
            r = await http.get(probe, headers={"x-request-id": "req-probe"})
            assert r.status_code == 200, probe
        await http.get("/favicon.ico", headers={"x-request-id": "req-after-probes"})
    # A line is written once its response has gone: wait for the last request's, which
    # comes after any the probes would have written (one connection, in order).
    deadline = time.monotonic() + 10
    while not _access(path, "req-after-probes"):
        assert time.monotonic() < deadline, "no access line for the request after the probes"
        await asyncio.sleep(0.05)
    assert _access(path, "req-probe") == []


async def _raw_get(base: str, target: bytes, *headers: bytes) -> bytes:
    """One GET written byte for byte (httpx would not send these); the answer's status line."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = b"GET " + target + b" HTTP/1.1\r\nHost: h\r\nConnection: close\r\n"
    writer.write(head + b"".join(h + b"\r\n" for h in headers) + b"\r\n")
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    return answer.split(b"\r\n")[0]


FORGED = "INFO replay.access: DELETE /v1/runs/{run_id} 204"


async def test_access_log_when_text_and_path_or_headers_hold_control_characters_then_one_line(
    text_server: Server,
) -> None:
    base, path = text_server
    forged = FORGED.replace(" ", "%20").replace("{", "%7B").replace("}", "%7D").encode()
    # A decoded path may hold any character; a header value may hold a tab and Latin-1's
    # C1 controls (NEL; CSI, a terminal escape), which the HTTP parser lets through.
    # Each with a line of its own after a line break of each kind.
    for i, brk in enumerate([b"%0A", b"%0D", b"%0D%0A", b"%E2%80%A8", b"%1B%5B2J%0B%0C"]):
        target = b"/v1/runs/forge-" + str(i).encode() + brk + forged + b"/events"
        status = await _raw_get(base, target, b"X-Request-Id: req-forge-path-%d" % i)
        assert status.startswith(b"HTTP/1.1 404"), status
    header = b"X-Run-Id: r\t\x85" + FORGED.encode() + b"\x9b2J"
    ua = b"User-Agent: ua\x85" + FORGED.encode()
    status = await _raw_get(base, b"/favicon.ico", header, ua, b"X-Request-Id: req-forge-hdr")
    assert status.startswith(b"HTTP/1.1 200"), status
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        await http.get("/favicon.ico", headers={"x-request-id": "req-flush"})
    deadline = time.monotonic() + 10
    while "request_id=req-flush" not in path.read_text():
        assert time.monotonic() < deadline, "no access line for the last request"
        await asyncio.sleep(0.05)
    lines = path.read_text().splitlines()  # splits at \r, \x0b, \x1c-\x1e, \x85, \u2028 too
    assert not [line for line in lines if line.startswith(FORGED)]
    for request_id in [f"req-forge-path-{i}" for i in range(5)] + ["req-forge-hdr"]:
        (line,) = [line for line in lines if f"request_id={request_id}" in line]
        assert line.startswith("INFO replay.access: GET "), line
        assert FORGED in line and line.isprintable(), line
    (line,) = [line for line in lines if "request_id=req-forge-hdr" in line]
    assert " run_id=" + '"r\\t\\x85' + FORGED.replace('"', '\\"') + '\\x9b2J" ' in line, line
