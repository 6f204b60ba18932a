"""One log, two protocols: a Durable Stream is a run, and a run is a Durable Stream."""

from __future__ import annotations

import httpx

from agent_replay.durable.offsets import format_offset
from tests.support.sse import parse

AGUI = [
    {"type": "RUN_STARTED", "threadId": "t-ds", "runId": "ds-run-1"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hel"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "lo"},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
]


async def test_json_stream_when_written_through_durable_streams_then_a_projected_run(
    client: httpx.AsyncClient,
) -> None:
    put = await client.put(
        "/v1/stream/ds-run-1", headers={"Content-Type": "application/json"}, json=AGUI[:2]
    )
    assert put.status_code == 201
    post = await client.post(
        "/v1/stream/ds-run-1", headers={"Content-Type": "application/json"}, json=AGUI[2:]
    )
    assert post.status_code == 204
    assert post.headers["stream-next-offset"] == format_offset(5)

    run = (await client.get("/v1/runs/ds-run-1")).json()
    assert (run["thread_id"], run["last_seq"], run["closed"]) == ("t-ds", 5, False)
    events = (await client.get("/v1/runs/ds-run-1/events")).json()["events"]
    assert [e["chunk"] for e in events] == AGUI
    messages = (await client.get("/v1/runs/ds-run-1/messages")).json()["messages"]
    assert messages[0]["parts"] == [{"type": "text", "content": "Hello"}]

    close = await client.post("/v1/stream/ds-run-1", headers={"Stream-Closed": "true"})
    assert close.status_code == 204
    assert (await client.get("/v1/runs/ds-run-1")).json()["status"] == "finished"


async def test_run_when_appended_through_run_api_then_reads_as_json_stream(
    client: httpx.AsyncClient,
) -> None:
    chunks = [{"type": "RUN_STARTED", "threadId": "t2", "runId": "plain-run"}, {"type": "X"}]
    await client.post("/v1/runs/plain-run/events", json={"events": chunks})

    head = await client.head("/v1/stream/plain-run")
    assert head.status_code == 200
    assert head.headers["content-type"] == "application/json"
    assert head.headers["stream-next-offset"] == format_offset(2)

    read = await client.get("/v1/stream/plain-run", params={"offset": format_offset(1)})
    assert read.json() == chunks[1:]
    assert read.headers["stream-up-to-date"] == "true"

    # Same config as the run has (JSON, open): 200; another one: 409.
    same = await client.put("/v1/stream/plain-run", headers={"Content-Type": "application/json"})
    assert same.status_code == 200
    other = await client.put("/v1/stream/plain-run", headers={"Content-Type": "text/plain"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "stream_conflict"

    await client.post("/v1/runs/plain-run/close", headers={"Content-Type": "application/json"})
    eof = await client.get("/v1/stream/plain-run", params={"offset": format_offset(2)})
    assert (eof.content, eof.headers["stream-closed"]) == (b"[]", "true")


async def test_byte_stream_when_appended_then_bytes_come_back_exactly_and_run_lists_them(
    client: httpx.AsyncClient,
) -> None:
    blob = bytes(range(256)) * 3
    put = await client.put(
        "/v1/stream/files/blob-1",
        headers={"Content-Type": "application/octet-stream"},
        content=blob,
    )
    assert put.status_code == 201
    await client.post(
        "/v1/stream/files/blob-1",
        headers={"Content-Type": "application/octet-stream"},
        content=b"\x00tail\xff",
    )
    read = await client.get("/v1/stream/files/blob-1")
    assert read.content == blob + b"\x00tail\xff"
    assert read.headers["stream-next-offset"] == format_offset(2)


async def test_append_when_stream_closed_then_409_with_stream_closed_and_nothing_added(
    client: httpx.AsyncClient,
) -> None:
    await client.put(
        "/v1/stream/closing",
        headers={"Content-Type": "text/plain", "Stream-Closed": "true"},
        content=b"done",
    )
    late = await client.post(
        "/v1/stream/closing", headers={"Content-Type": "text/plain"}, content=b"more"
    )
    assert late.status_code == 409
    assert late.headers["stream-closed"] == "true"
    assert late.headers["stream-next-offset"] == format_offset(1)
    assert late.json()["error"]["code"] == "stream_closed"
    assert (await client.get("/v1/stream/closing")).content == b"done"


async def test_put_when_refused_then_neither_stream_nor_run_is_left(
    client: httpx.AsyncClient,
) -> None:
    bad_json = await client.put(
        "/v1/stream/half-1", headers={"Content-Type": "application/json"}, content=b"[1, nope"
    )
    assert (bad_json.status_code, bad_json.json()["error"]["code"]) == (400, "invalid_json")
    await client.put("/v1/stream/half-src", headers={"Content-Type": "text/plain"}, content=b"ab")
    bad_fork = await client.put(
        "/v1/stream/half-2",
        headers={
            "Stream-Forked-From": "/v1/stream/half-src",
            "Stream-Fork-Offset": format_offset(0),
            "Stream-Fork-Sub-Offset": "3",
        },
    )
    assert (bad_fork.status_code, bad_fork.json()["error"]["code"]) == (400, "invalid_fork_offset")
    for name in ("half-1", "half-2"):
        assert (await client.head(f"/v1/stream/{name}")).status_code == 404
        assert (await client.get(f"/v1/runs/{name}")).status_code == 404


async def test_producer_when_retried_after_success_then_204_duplicate_and_stored_once(
    client: httpx.AsyncClient,
) -> None:
    await client.put("/v1/stream/prod-1", headers={"Content-Type": "application/json"})
    send = {
        "Content-Type": "application/json",
        "Producer-Id": "p",
        "Producer-Epoch": "0",
        "Producer-Seq": "0",
    }
    first = await client.post("/v1/stream/prod-1", headers=send, json=[{"n": 1}, {"n": 2}])
    again = await client.post("/v1/stream/prod-1", headers=send, json=[{"n": 1}, {"n": 2}])
    assert (first.status_code, again.status_code) == (200, 204)
    assert again.headers["stream-next-offset"] == first.headers["stream-next-offset"]
    gap = await client.post(
        "/v1/stream/prod-1", headers={**send, "Producer-Seq": "5"}, json=[{"n": 3}]
    )
    assert gap.status_code == 409
    assert (gap.headers["producer-expected-seq"], gap.headers["producer-received-seq"]) == (
        "1",
        "5",
    )
    assert (await client.get("/v1/stream/prod-1")).json() == [{"n": 1}, {"n": 2}]


async def test_text_stream_when_read_over_sse_then_lines_keep_their_leading_spaces(
    client: httpx.AsyncClient,
) -> None:
    body = "  indented\n second\nthird"
    await client.put(
        "/v1/stream/spaced",
        headers={"Content-Type": "text/plain", "Stream-Closed": "true"},
        content=body.encode(),
    )
    read = await client.get("/v1/stream/spaced", params={"offset": "-1", "live": "sse"})
    data = [e.data for e in parse(read.text).events if e.event == "data"]
    assert "".join(data) == body
