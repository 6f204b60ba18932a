"""Catch-up read-ahead: the next page is read while this one is sent, and what was read
ahead never answers for another life of the name or short of a tail that moved."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from agent_replay.api.app import create_app
from agent_replay.durable.offsets import format_offset
from agent_replay.durable.readahead import ReadAhead
from agent_replay.log import EventLog
from agent_replay.log.chunks import stored
from agent_replay.log.streams import NewStream, StreamState, StreamStore
from tests.conftest import settings_for
from tests.support.servers import serve_asgi

JSON = {"Content-Type": "application/json"}
PAGE = 3


@dataclass
class Served:
    base_url: str
    ahead: ReadAhead


@pytest.fixture(scope="module")
async def small_pages(database_url: str) -> AsyncIterator[Served]:
    app = create_app(
        settings_for(database_url, durable_read_max_messages=PAGE), migrate_on_start=False
    )
    async with serve_asgi(app) as base_url:
        yield Served(base_url, app.state.replay.durable.ahead)


@pytest.fixture
async def http(small_pages: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=small_pages.base_url, timeout=30) as client:
        yield client


async def _page(http: httpx.AsyncClient, name: str, offset: str) -> httpx.Response:
    response = await http.get(f"/v1/stream/{name}", params={"offset": offset})
    assert response.status_code == 200, response.text
    return response


async def _read_ahead_settled(served: Served) -> None:
    """Wait until a page was read ahead and none is in flight (the next request takes it)."""
    async with asyncio.timeout(10):
        # No event says a background read finished: poll, with a deadline.
        while not len(served.ahead) or served.ahead.reading():  # noqa: ASYNC110
            await asyncio.sleep(0.01)


async def test_read_ahead_when_name_deleted_and_created_again_then_new_life_is_read(
    http: httpx.AsyncClient, small_pages: Served
) -> None:
    name = "ra-again"
    await http.put(f"/v1/stream/{name}", headers=JSON, json=[{"life": 1, "n": n} for n in range(9)])
    first = await _page(http, name, "-1")
    assert [m["n"] for m in first.json()] == [0, 1, 2]
    await _read_ahead_settled(small_pages)  # the old life's second page is ready
    assert (await http.delete(f"/v1/stream/{name}")).status_code == 204
    await http.put(f"/v1/stream/{name}", headers=JSON, json=[{"life": 2, "n": n} for n in range(9)])
    second = await _page(http, name, first.headers["stream-next-offset"])
    assert second.json() == [{"life": 2, "n": n} for n in (3, 4, 5)]


async def test_read_ahead_when_tail_moved_since_then_page_goes_up_to_the_new_tail(
    http: httpx.AsyncClient, small_pages: Served
) -> None:
    name = "ra-tail"
    await http.put(f"/v1/stream/{name}", headers=JSON, json=list(range(5)))
    first = await _page(http, name, "-1")
    assert first.json() == [0, 1, 2]
    await _read_ahead_settled(small_pages)  # [3, 4]: the whole rest as the tail then was
    post = await http.post(f"/v1/stream/{name}", headers=JSON, json=[5, 6])
    assert post.status_code == 204
    second = await _page(http, name, first.headers["stream-next-offset"])
    assert second.json() == [3, 4, 5]
    assert second.headers["stream-next-offset"] == format_offset(6)
    assert "stream-up-to-date" not in second.headers


async def test_read_ahead_when_many_readers_page_through_then_each_gets_every_message_once(
    http: httpx.AsyncClient, small_pages: Served
) -> None:
    name = "ra-many"
    total = 40
    await http.put(f"/v1/stream/{name}", headers=JSON, json=list(range(total)))

    async def read(offset: str) -> list[int]:
        got: list[int] = []
        while True:
            page = await _page(http, name, offset)
            got += page.json()
            offset = page.headers["stream-next-offset"]
            if page.headers.get("stream-up-to-date") == "true":
                return got

    starts = [0, 0, 1, 7, 20, 39, 40]
    results = await asyncio.gather(*(read(format_offset(s) if s else "-1") for s in starts))
    for start, got in zip(starts, results, strict=True):
        assert got == list(range(start, total)), start
    # SSE catch-up reads the same pages, each message once.
    async with http.stream(
        "GET", f"/v1/stream/{name}", params={"offset": format_offset(5), "live": "sse"}
    ) as response:
        seen: list[int] = []
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "data":
                seen += json.loads(line[5:])
                if len(seen) >= total - 5:
                    break
    assert seen == list(range(5, total))


async def test_read_ahead_when_pages_evicted_while_awaited_then_readers_still_get_all_once(
    database_url: str,
) -> None:
    """One page held at most: readers far apart evict each other's pages, some while
    another reader awaits them; each reader still reads every message once."""
    async with EventLog.connect(database_url, pool_size=6) as log:
        store = StreamStore(log)
        name = "ra-evicted"
        chunks = [stored({"type": "M", "n": n}, n) for n in range(60)]
        await store.create(NewStream(name, "application/json", None, None, True), chunks)

        async def read_page(state: StreamState, after: int) -> tuple[int, int, str]:
            return await store.read_json(state, after, state.last_seq, 2, 1 << 20)

        ahead = ReadAhead(read_page, max_pages=1)

        async def reader(after: int) -> list[int]:
            state = await store.lookup(name, touch=False)
            assert state is not None
            got: list[int] = []
            while after < state.last_seq:
                after, text = await ahead.page(state, after)
                got += [m["n"] for m in json.loads("[" + text + "]")]
            return got

        try:
            starts = [0, 0, 10, 25, 40, 41]
            results = await asyncio.gather(*(reader(s) for s in starts))
        finally:
            await ahead.close()
        for start, got in zip(starts, results, strict=True):
            assert got == list(range(start, 60)), start
        assert len(ahead) == 0
