"""A plain append to a stream a replica remembers skips the lookup (agent_replay.durable.known).

Each test makes the first replica remember a stream (an append through it), changes
the stream through the second, then appends through the first again: the answer must
be what the stream is now, and nothing may reach a run it no longer names.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.servers import serve_in_process

JSON = {"Content-Type": "application/json"}


Clients = tuple[httpx.AsyncClient, httpx.AsyncClient]


@pytest.fixture(scope="module")
async def replicas(database_url: str) -> AsyncIterator[Clients]:
    async with (
        serve_in_process(settings_for(database_url)) as a,
        serve_in_process(settings_for(database_url)) as b,
        httpx.AsyncClient(base_url=a.base_url, timeout=30) as http_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=30) as http_b,
    ):
        yield http_a, http_b


def _message(i: int) -> dict[str, object]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"d{i}"}


async def _remembered(http: httpx.AsyncClient, name: str, media: str = "application/json") -> None:
    """Create `name` and append to it twice through `http`, which then remembers it."""
    typed = {"Content-Type": media}
    assert (await http.put(f"/v1/stream/{name}", headers=typed)).status_code == 201
    for i in range(2):
        body = json.dumps([_message(i)]).encode() if "json" in media else b"x"
        reply = await http.post(f"/v1/stream/{name}", content=body, headers=typed)
        assert reply.status_code == 204, reply.text


async def _messages(http: httpx.AsyncClient, name: str) -> list[object]:
    reply = await http.get(f"/v1/stream/{name}", params={"offset": "-1"})
    assert reply.status_code == 200, reply.text
    messages: list[object] = reply.json()
    return messages


async def test_append_when_remembered_stream_remade_as_other_type_then_type_mismatch_nothing_stored(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-retyped")
    assert (await b.delete("/v1/stream/known-retyped")).status_code == 204
    remade = await b.put("/v1/stream/known-retyped", headers={"Content-Type": "text/plain"})
    assert remade.status_code == 201

    reply = await a.post("/v1/stream/known-retyped", json=[_message(9)], headers=JSON)

    assert reply.status_code == 409
    assert reply.json()["error"]["code"] == "content_type_mismatch"
    run = (await b.get("/v1/runs/known-retyped")).json()
    assert run["last_seq"] == 0  # the remade stream got nothing


async def test_append_when_remembered_stream_remade_same_type_then_appended_to_new_life(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-remade")
    assert (await b.delete("/v1/stream/known-remade")).status_code == 204
    assert (await b.put("/v1/stream/known-remade", headers=JSON)).status_code == 201

    first = await a.post("/v1/stream/known-remade", json=[_message(7)], headers=JSON)
    second = await a.post("/v1/stream/known-remade", json=[_message(8)], headers=JSON)

    assert (first.status_code, second.status_code) == (204, 204)
    assert await _messages(b, "known-remade") == [_message(7), _message(8)]


async def test_append_when_remembered_stream_deleted_elsewhere_then_not_found(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-deleted")
    assert (await b.delete("/v1/stream/known-deleted")).status_code == 204

    reply = await a.post("/v1/stream/known-deleted", json=[_message(3)], headers=JSON)

    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "stream_not_found"
    assert (await b.get("/v1/runs/known-deleted")).status_code == 404


async def test_append_when_remembered_stream_soft_deleted_elsewhere_then_gone_and_run_unchanged(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-source")
    fork = await b.put(
        "/v1/stream/known-fork",
        headers={**JSON, "Stream-Forked-From": "/v1/stream/known-source"},
    )
    assert fork.status_code == 201, fork.text
    assert (await b.delete("/v1/stream/known-source")).status_code == 204  # forks read it: kept

    reply = await a.post("/v1/stream/known-source", json=[_message(5)], headers=JSON)

    assert reply.status_code == 410
    assert reply.json()["error"]["code"] == "stream_gone"
    assert (await b.get("/v1/runs/known-source")).json()["last_seq"] == 2
    assert await _messages(b, "known-fork") == [_message(0), _message(1)]


async def test_append_when_remembered_stream_closed_elsewhere_then_stream_closed_at_its_tail(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-closed")
    closed = await b.post("/v1/stream/known-closed", headers={"Stream-Closed": "true"})
    assert closed.status_code == 204

    reply = await a.post("/v1/stream/known-closed", json=[_message(4)], headers=JSON)

    assert reply.status_code == 409
    assert reply.json()["error"]["code"] == "stream_closed"
    assert reply.headers["Stream-Closed"] == "true"
    assert reply.headers["Stream-Next-Offset"] == closed.headers["Stream-Next-Offset"]
    assert len(await _messages(b, "known-closed")) == 2


async def test_append_when_remembered_byte_stream_then_each_body_stored_once(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-bytes", "application/octet-stream")

    octets = {"Content-Type": "application/octet-stream"}
    reply = await a.post("/v1/stream/known-bytes", content=b"yz", headers=octets)

    assert reply.status_code == 204
    body = await b.get("/v1/stream/known-bytes", params={"offset": "-1"})
    assert body.content == b"xxyz"


async def test_read_when_remembered_stream_changed_elsewhere_then_answered_as_it_is_now(
    replicas: Clients,
) -> None:
    a, b = replicas
    for name in ("read-deleted", "read-remade", "read-closed", "read-source"):
        await _remembered(a, name)
    assert (await b.delete("/v1/stream/read-deleted")).status_code == 204
    assert (await b.delete("/v1/stream/read-remade")).status_code == 204
    remade = await b.put("/v1/stream/read-remade", headers={"Content-Type": "text/plain"})
    assert remade.status_code == 201
    closed = await b.post("/v1/stream/read-closed", headers={"Stream-Closed": "true"})
    assert closed.status_code == 204
    fork = await b.put(
        "/v1/stream/read-fork", headers={**JSON, "Stream-Forked-From": "/v1/stream/read-source"}
    )
    assert fork.status_code == 201
    assert (await b.delete("/v1/stream/read-source")).status_code == 204

    deleted = await a.get("/v1/stream/read-deleted", params={"offset": "-1"})
    remade_read = await a.get("/v1/stream/read-remade", params={"offset": "-1"})
    closed_read = await a.get("/v1/stream/read-closed", params={"offset": "-1"})
    gone = await a.get("/v1/stream/read-source", params={"offset": "-1"})
    polled = await a.get(
        "/v1/stream/read-closed",
        params={"offset": closed.headers["Stream-Next-Offset"], "live": "long-poll"},
    )

    assert deleted.status_code == 404
    assert (remade_read.status_code, remade_read.content) == (200, b"")
    assert remade_read.headers["Content-Type"].startswith("text/plain")
    assert closed_read.headers["Stream-Closed"] == "true" and len(closed_read.json()) == 2
    assert gone.status_code == 410
    assert polled.status_code == 204 and polled.headers["Stream-Closed"] == "true"


async def test_long_poll_when_remembered_stream_appended_elsewhere_then_woken_with_the_messages(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "read-live")
    tail = (await a.head("/v1/stream/read-live")).headers["Stream-Next-Offset"]

    async def poll() -> httpx.Response:
        return await a.get("/v1/stream/read-live", params={"offset": tail, "live": "long-poll"})

    waiting = asyncio.create_task(poll())
    while not waiting.done():
        posted = await b.post("/v1/stream/read-live", json=[_message(5), _message(6)], headers=JSON)
        assert posted.status_code == 204
        await asyncio.wait({waiting}, timeout=0.2)
    reply = waiting.result()
    assert reply.status_code == 200
    assert reply.json()[:2] == [_message(5), _message(6)]
    assert reply.headers["Stream-Cursor"]


def _producer(seq: int, producer: str = "p-1") -> dict[str, str]:
    return {**JSON, "Producer-Id": producer, "Producer-Epoch": "0", "Producer-Seq": str(seq)}


async def test_producer_append_when_remembered_stream_remade_as_other_type_then_mismatch(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-producer-retyped")
    first = await a.post(
        "/v1/stream/known-producer-retyped", json=[_message(1)], headers=_producer(0)
    )
    assert first.status_code == 200, first.text
    assert (await b.delete("/v1/stream/known-producer-retyped")).status_code == 204
    remade = await b.put(
        "/v1/stream/known-producer-retyped", headers={"Content-Type": "text/plain"}
    )
    assert remade.status_code == 201

    reply = await a.post(
        "/v1/stream/known-producer-retyped", json=[_message(2)], headers=_producer(0, "p-2")
    )

    assert reply.status_code == 409
    assert reply.json()["error"]["code"] == "content_type_mismatch"
    assert (await b.get("/v1/runs/known-producer-retyped")).json()["last_seq"] == 0


async def test_producer_append_when_remembered_stream_soft_deleted_elsewhere_then_gone(
    replicas: Clients,
) -> None:
    a, b = replicas
    await _remembered(a, "known-producer-source")
    fork = await b.put(
        "/v1/stream/known-producer-fork",
        headers={**JSON, "Stream-Forked-From": "/v1/stream/known-producer-source"},
    )
    assert fork.status_code == 201
    assert (await b.delete("/v1/stream/known-producer-source")).status_code == 204

    reply = await a.post(
        "/v1/stream/known-producer-source", json=[_message(3)], headers=_producer(0)
    )

    assert reply.status_code == 410
    assert (await b.get("/v1/runs/known-producer-source")).json()["last_seq"] == 2
