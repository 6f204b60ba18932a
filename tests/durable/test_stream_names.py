"""Stream names and stored headers the database or an HTTP header cannot carry as they
are: a name beyond Latin-1 works (its `Location` percent-encoded); NUL
in a name is refused before anything is made, in our own words (invalid UTF-8
in a path arrives as U+FFFD, which is stored as it is)."""

from __future__ import annotations

import asyncio

import asyncpg
import httpx
import pytest

from tests.access.conftest import log_digest
from tests.support.servers import Running


async def _raw(base: str, request: bytes) -> tuple[int, bytes, bytes]:
    """(status, head, body) of one request sent byte for byte (no client re-encodes it)."""
    host, port = base.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(request)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), head, body


def _put(path: bytes, *headers: bytes) -> bytes:
    lines = [b"PUT " + path + b" HTTP/1.1", b"Host: 127.0.0.1", *headers,
             b"Content-Length: 0", b"Connection: close"]  # fmt: skip
    return b"\r\n".join(lines) + b"\r\n\r\n"


async def test_put_of_a_name_beyond_latin_1_is_created_with_a_percent_encoded_location(
    client: httpx.AsyncClient,
) -> None:
    r = await client.put("/v1/stream/café-✓/日本", headers={"Content-Type": "text/plain"})
    assert r.status_code == 201, r.text
    location = r.headers["location"]
    assert location.endswith("/v1/stream/caf%C3%A9-%E2%9C%93/%E6%97%A5%E6%9C%AC")
    appended = await client.post(location, content=b"hi", headers={"Content-Type": "text/plain"})
    assert appended.status_code == 204
    assert (await client.get(location, params={"offset": "-1"})).content == b"hi"


@pytest.mark.parametrize("path", [b"/v1/stream/a%00b", b"/v1/stream/%00", b"/v1/stream/x/%00/y"])
async def test_put_of_a_name_with_nul_is_refused_in_our_words_and_nothing_made(
    service: Running, database_url: str, path: bytes
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        before = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
        status, _, body = await _raw(service.base_url, _put(path, b"Content-Type: text/plain"))
        after = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
    finally:
        await conn.close()
    assert status == 400, body
    error = httpx.Response(400, content=body).json()["error"]
    assert error["code"] == "invalid_parameter"
    assert "NUL" in error["message"] and "postgres" not in error["message"].lower()
    assert after == before


@pytest.mark.parametrize("header", [b"Content-Type: text/pl\x00ain", b"Stream-Seq: a\x00b",
                                    b"Producer-Id: p\x00"])  # fmt: skip
async def test_put_with_nul_in_a_stored_header_is_refused_and_nothing_made(
    service: Running, database_url: str, header: bytes
) -> None:
    # The HTTP parser refuses it before the service sees it; the service's own check
    # (agent_replay.durable.headers.check_storable) stands behind any server that lets it by.
    conn = await asyncpg.connect(database_url)
    try:
        before = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
        status, _, body = await _raw(service.base_url, _put(b"/v1/stream/nul-header", header))
        after = await log_digest(conn), await conn.fetchval("SELECT count(*) FROM streams")
    finally:
        await conn.close()
    assert status == 400, body
    assert b"postgres" not in body.lower() and b"0x00" not in body
    assert after == before
