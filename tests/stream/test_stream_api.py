"""The stream endpoint over a real socket: offsets, encodings, end of stream, errors."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from agent_replay.log import EventLog
from tests.stream.conftest import Served
from tests.stream.wire import NdjsonReader, SseReader

DEADLINE = 10.0


async def _append(
    http: httpx.AsyncClient, run: str, n: int, *, close: bool = False, start: int = 0
) -> None:
    events = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"d{start + i}"}
        for i in range(n)
    ]
    r = await http.post(f"/v1/runs/{run}/events", json={"events": events, "close": close})
    assert r.status_code == 200, r.text


async def _stored(event_log: EventLog, run: str) -> list[tuple[int, str]]:
    return [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, 100_000)]


async def _read_to_end(
    http: httpx.AsyncClient, run: str, headers: dict[str, str] | None = None, **params: str
) -> tuple[httpx.Response, SseReader]:
    reader = SseReader()
    async with http.stream("GET", f"/v1/runs/{run}/stream", headers=headers, params=params) as r:
        async for data in r.aiter_raw():
            reader.feed(data)
    return r, reader


@asynccontextmanager
async def _following(
    http: httpx.AsyncClient, run: str, headers: dict[str, str] | None = None, **params: str
) -> AsyncIterator[tuple[httpx.Response, AsyncIterator[bytes]]]:
    async with http.stream("GET", f"/v1/runs/{run}/stream", headers=headers, params=params) as r:
        yield r, r.aiter_raw()


async def _until(reader: SseReader | NdjsonReader, raw: AsyncIterator[bytes], count: int) -> None:
    async with asyncio.timeout(DEADLINE):
        while len(reader.events) < count:
            reader.feed(await anext(raw))


async def test_stream_when_run_closed_then_replays_stored_text_and_ends(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    # Spacing and key order as sent: replay must send the stored text, not a re-encoding.
    body = b'{"type": "A",  "z": 1, "a": [1.50, "\\u00e9"]}\n{"type":"B"}\n'
    r = await http.post(
        "/v1/runs/s-closed/events?close=true",
        content=body,
        headers={"Content-Type": "application/x-ndjson"},
    )
    assert r.status_code == 200, r.text
    response, reader = await _read_to_end(http, "s-closed")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert reader.retry and reader.retry[0] > 0
    assert reader.events == await _stored(event_log, "s-closed")
    assert reader.events[0][1] == '{"type": "A",  "z": 1, "a": [1.50, "\\u00e9"]}'


async def test_stream_when_last_event_id_then_strictly_after_it_and_header_wins(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "s-resume", 10, close=True)
    stored = await _stored(event_log, "s-resume")
    _, reader = await _read_to_end(http, "s-resume", {"Last-Event-ID": "4"}, offset="-1")
    assert reader.events == stored[4:]
    _, reader = await _read_to_end(http, "s-resume", offset="7")
    assert reader.events == stored[7:]
    _, reader = await _read_to_end(http, "s-resume", offset="-1")
    assert reader.events == stored
    _, reader = await _read_to_end(http, "s-resume")
    assert reader.events == stored


async def test_stream_when_offset_now_then_only_later_appends_then_ends_on_close(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "s-now", 3)
    reader = SseReader()
    async with _following(http, "s-now", offset="now") as (response, raw):
        assert response.status_code == 200
        await _append(http, "s-now", 2, start=3)
        await _until(reader, raw, 2)
        r = await http.post("/v1/runs/s-now/close", headers={"Content-Type": "application/json"})
        assert r.status_code == 200
        async with asyncio.timeout(DEADLINE):
            async for data in raw:
                reader.feed(data)
    assert reader.events == (await _stored(event_log, "s-now"))[3:]


async def test_stream_when_open_run_idle_then_heartbeat_and_no_end(
    http: httpx.AsyncClient, served: Served
) -> None:
    await _append(http, "s-idle", 1)
    reader = SseReader()
    async with _following(http, "s-idle") as (_, raw):
        await _until(reader, raw, 1)
        # The fixture's heartbeat is 0.3 s: two comments prove it repeats while idle.
        async with asyncio.timeout(DEADLINE):
            while reader.comments < 2:
                reader.feed(await anext(raw))
        assert reader.events == [(1, reader.events[0][1])]


async def test_stream_when_ndjson_then_envelopes_and_blank_line_keepalive(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    await _append(http, "s-ndjson", 4)
    for headers, params in (({"Accept": "application/x-ndjson"}, {}), ({}, {"format": "ndjson"})):
        reader = NdjsonReader()
        async with _following(http, "s-ndjson", headers, offset="1", **params) as (response, raw):
            assert response.headers["content-type"].startswith("application/x-ndjson")
            await _until(reader, raw, 3)
            async with asyncio.timeout(DEADLINE):
                while reader.blank_lines < 1:
                    reader.feed(await anext(raw))
        stored = (await _stored(event_log, "s-ndjson"))[1:]
        assert reader.events == [
            (s, json.dumps(json.loads(c), separators=(",", ":"))) for s, c in stored
        ]


async def test_stream_when_closed_and_offset_at_last_seq_then_204(http: httpx.AsyncClient) -> None:
    await _append(http, "s-done", 3, close=True)
    for headers, params in (
        ({"Last-Event-ID": "3"}, {}),
        ({}, {"offset": "3"}),
        ({}, {"offset": "now"}),
    ):
        r = await http.get("/v1/runs/s-done/stream", headers=headers, params=params)
        assert r.status_code == 204
        assert r.content == b""


async def test_stream_when_closed_empty_run_from_start_then_204(http: httpx.AsyncClient) -> None:
    assert (
        await http.put("/v1/runs/s-empty", headers={"Content-Type": "application/json"})
    ).status_code == 201
    assert (
        await http.post("/v1/runs/s-empty/close", headers={"Content-Type": "application/json"})
    ).status_code == 200
    assert (await http.get("/v1/runs/s-empty/stream")).status_code == 204


async def test_stream_when_offset_beyond_last_seq_then_409_with_last_seq(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "s-beyond", 2)
    for headers, params in (({"Last-Event-ID": "3"}, {}), ({}, {"offset": "99999999999999999999"})):
        r = await http.get("/v1/runs/s-beyond/stream", headers=headers, params=params)
        assert r.status_code == 409
        error = r.json()["error"]
        assert error["code"] == "offset_out_of_range"
        assert error["last_seq"] == 2


@pytest.mark.parametrize("bad", ["abc", "-2", "1.5", "+3", "0x10", "1e3", "", "٣"])
async def test_stream_when_offset_malformed_then_400(http: httpx.AsyncClient, bad: str) -> None:
    await _append(http, "s-bad", 1)
    r = await http.get("/v1/runs/s-bad/stream", params={"offset": bad})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_offset"


async def test_stream_when_last_event_id_malformed_then_400(http: httpx.AsyncClient) -> None:
    await _append(http, "s-bad-id", 1)
    r = await http.get("/v1/runs/s-bad-id/stream", headers={"Last-Event-ID": "memory:v1:r9:2"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "invalid_offset"


async def test_stream_when_run_unknown_then_404(http: httpx.AsyncClient) -> None:
    r = await http.get("/v1/runs/no-such-run/stream")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "run_not_found"


async def test_stream_when_closed_then_ends_promptly_after_last_event(
    http: httpx.AsyncClient,
) -> None:
    await _append(http, "s-prompt", 2)
    reader = SseReader()
    async with _following(http, "s-prompt") as (_, raw):
        await _until(reader, raw, 2)
        await _append(http, "s-prompt", 1, close=True, start=2)
        started = time.monotonic()
        async with asyncio.timeout(DEADLINE):
            async for data in raw:
                reader.feed(data)
        # Woken by the close's notification, not by a re-check or heartbeat.
        assert time.monotonic() - started < 0.5
    assert [seq for seq, _ in reader.events] == [1, 2, 3]
