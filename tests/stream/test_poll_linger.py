"""A long-poll's channel lingers after the poll (`Hub.subscribe(linger=, life=)`).

The follower's next poll takes over the channel with what was committed in
between buffered. What must hold: every message once, in order, across polls;
the channel goes once nobody polls; and an idle channel is only ever taken over
by a poller of the run's same life, so a name deleted and made again (on any
replica) never answers from the earlier life's buffer.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_replay.log import EventLog
from agent_replay.log.values import RunState
from agent_replay.stream import Hub
from tests.conftest import settings_for
from tests.stream.conftest import Served, serve_app, wait_for

DEADLINE = 10.0
JSON = {"Content-Type": "application/json"}


@pytest.fixture
async def event_log(database_url: str) -> AsyncIterator[EventLog]:
    log = await EventLog.open(database_url, pool_size=4)
    yield log
    await log.close()


# -- the hub ----------------------------------------------------------------


@pytest.fixture
async def hub(event_log: EventLog) -> AsyncIterator[Hub]:
    """A hub told of commits by the test (no LISTEN), stopped after it."""
    hub = Hub(event_log, listen=False)
    yield hub
    await hub.stop()


def _run_id() -> str:
    return f"linger-{uuid.uuid4().hex[:10]}"


async def test_subscribe_when_idle_channel_of_same_life_then_taken_over_with_its_buffer(
    event_log: EventLog, hub: Hub
) -> None:
    run = _run_id()
    await event_log.append(run, [{"type": "A"}])
    with hub.subscribe(run, linger=30, life="one") as sub:
        first = sub.channel
        first.anchor(RunState(1, False))
    remove = event_log.on_commit_rows(
        lambda run_id, rows, last, closed: (
            hub.committed(run_id, rows, last, closed) if run_id == run else None
        )
    )
    try:
        await event_log.append(run, [{"type": "B", "s": "caf\u00e9"}])
    finally:
        remove()
    # Nobody followed the run as it was appended to, yet the lingering channel took it.
    with hub.subscribe(run, linger=30, life="one") as sub:
        assert sub.channel is first
        stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, after=1)]
        assert sub.channel.rows_after(1) == stored


@pytest.mark.parametrize("life", [None, "two"])
async def test_subscribe_when_idle_channel_of_other_or_unknown_life_then_new_channel(
    hub: Hub, life: str | None
) -> None:
    run = _run_id()
    with hub.subscribe(run, linger=30, life="one") as sub:
        first = sub.channel
        first.anchor(RunState(0, False))
    with hub.subscribe(run, life=life) as sub:
        assert sub.channel is not first
        assert sub.channel.head is None  # nothing of the other life is served
    assert hub.stats().channels == 0


async def test_release_when_lingering_then_channel_retired_after_the_linger(hub: Hub) -> None:
    with hub.subscribe(_run_id(), linger=0.2, life="one"):
        pass
    assert hub.stats().channels == 1
    await wait_for(lambda: hub.stats().channels == 0, "the lingering channel retired")


async def test_release_when_resubscribed_within_linger_then_earlier_timer_spares_it(
    hub: Hub,
) -> None:
    run = _run_id()
    with hub.subscribe(run, linger=0.1, life="one") as sub:
        first = sub.channel
    with hub.subscribe(run, linger=0.1, life="one") as sub:
        assert sub.channel is first
        # Another run's channel, released after the first release with the same linger,
        # retires: the first release's timer (due no later, on the same loop) has fired
        # by then, while this subscriber holds the channel.
        later = _run_id()
        with hub.subscribe(later, linger=0.1, life="one"):
            pass
        await wait_for(lambda: not hub.follows(later), "the later released channel retired")
        assert hub.follows(run) and hub.stats().channels == 1
    await wait_for(lambda: hub.stats().channels == 0, "retired after the second release")


# -- long-poll over HTTP ------------------------------------------------------


@pytest.fixture(scope="module")
async def replicas(database_url: str) -> AsyncIterator[tuple[Served, Served]]:
    settings = settings_for(database_url, durable_poll_linger_seconds=30.0)
    async with serve_app(settings) as a, serve_app(settings) as b:
        yield a, b


async def _poll(http: httpx.AsyncClient, path: str, offset: str) -> httpx.Response:
    return await http.get(path, params={"offset": offset, "live": "long-poll"})


async def test_long_poll_when_messages_joined_across_polls_then_equal_the_catch_up(
    replicas: tuple[Served, Served],
) -> None:
    a, _ = replicas
    path = f"/v1/stream/poll-{uuid.uuid4().hex[:10]}"
    joined: list[object] = []
    async with httpx.AsyncClient(base_url=a.base_url, timeout=30) as http:
        assert (await http.put(path, headers=JSON)).status_code == 201
        offset = "-1"
        async with asyncio.timeout(DEADLINE * 3):
            for i in range(30):
                for j in range(i % 4):
                    await http.post(path, content=json.dumps([{"i": i, "j": j}]), headers=JSON)
                poll = asyncio.create_task(_poll(http, path, offset))
                await http.post(path, content=json.dumps([{"i": i}]), headers=JSON)
                reply = await poll
                assert reply.status_code == 200, reply.text
                joined.extend(reply.json())
                offset = reply.headers["stream-next-offset"]
                # Between polls the channel lingers: the next appends reach its buffer.
                assert a.hub.stats().channels >= 1
        rest = await http.get(path, params={"offset": offset})
        joined.extend(rest.json())
        everything = (await http.get(path, params={"offset": "-1"})).json()
    assert joined == everything


async def test_long_poll_when_stream_remade_on_other_replica_then_answers_the_new_life(
    replicas: tuple[Served, Served],
) -> None:
    a, b = replicas
    path = f"/v1/stream/poll-{uuid.uuid4().hex[:10]}"
    async with (
        httpx.AsyncClient(base_url=a.base_url, timeout=30) as http_a,
        httpx.AsyncClient(base_url=b.base_url, timeout=30) as http_b,
    ):
        assert (await http_a.put(path, headers=JSON)).status_code == 201
        await http_a.post(path, content=b'[{"life":1,"n":1}]', headers=JSON)
        poll = asyncio.create_task(_poll(http_a, path, "-1"))
        reply = await poll
        assert reply.json() == [{"life": 1, "n": 1}]
        # A's poll channel lingers with life 1 buffered; the next messages come as
        # it still holds them.
        await http_a.post(path, content=b'[{"life":1,"n":2},{"life":1,"n":3}]', headers=JSON)
        await wait_for(lambda: a.hub.stats().channels >= 1, "A's channel lingers")
        assert (await http_b.delete(path)).status_code == 204
        assert (await http_b.put(path, headers=JSON)).status_code == 201
        await http_b.post(path, content=b'[{"life":2,"n":1},{"life":2,"n":2}]', headers=JSON)

        reply = await _poll(http_a, path, reply.headers["stream-next-offset"])

        assert reply.status_code == 200, reply.text
        assert reply.json() == [{"life": 2, "n": 2}]
