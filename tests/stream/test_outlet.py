"""A caught-up follower's events are written by the commit that buffers them.

Over a real socket to the served app: what a follower read while catching
up is sent by its own task (`by="follower"`), what this process commits
while it waits is written by the commit (`by="commit"`), and either way every
event arrives once, in order, however the two paths take turns: a client
whose window fills mid-write hands the rest to its task, a follower that
joins while events keep coming switches paths as often as it catches up.
"""

from __future__ import annotations

import asyncio

import httpx

from agent_replay.log import EventLog
from tests.ops.scrape import delta, scrape
from tests.stream.conftest import Served
from tests.stream.wire import SseReader, dechunk, open_slow_reader

SENT = "replay_stream_events_sent_total"


def _chunks(start: int, count: int, pad: str = "") -> list[dict[str, object]]:
    numbers = range(start, start + count)
    return [{"type": "TEXT_MESSAGE_CONTENT", "delta": f"{n}{pad}"} for n in numbers]


async def _stalled_follower(
    served: Served, http: httpx.AsyncClient, run: str, query: str, appends: list[dict[str, object]]
) -> SseReader:
    """A follower of `run` that is caught up after seq 1, then reads nothing while each of
    `appends` is committed on its own and the run closed; then it reads it all."""
    reader, writer = await open_slow_reader(served.base_url, f"/v1/runs/{run}/stream{query}")
    try:
        await reader.readuntil(b"\r\n\r\n")
        body = b""
        while b"id: 1\n" not in body:  # caught up: waiting at its channel
            body += await reader.read(1 << 16)
        for chunk in appends:
            await http.post(f"/v1/runs/{run}/events", json={"events": [chunk]})
        await http.post(f"/v1/runs/{run}/close", headers={"Content-Type": "application/json"})
        async with asyncio.timeout(60):
            body += await reader.read()
    finally:
        writer.close()
    events = SseReader()
    events.feed(dechunk(body))
    return events


async def test_follower_when_caught_up_then_each_live_commit_is_written_by_the_commit(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    run = "/v1/runs/outlet-live"
    await http.post(f"{run}/events", json={"events": _chunks(0, 3)})
    before = await scrape(http)
    reader = SseReader()
    async with http.stream("GET", f"{run}/stream") as response:
        raw = response.aiter_raw()
        while len(reader.events) < 3:
            reader.feed(await anext(raw))
        # One append at a time, each read before the next: the follower waits caught up.
        for n in range(3, 13):
            await http.post(f"{run}/events", json={"events": _chunks(n, 1)})
            while len(reader.events) < n + 1:
                reader.feed(await anext(raw))
        await http.post(f"{run}/close", headers={"Content-Type": "application/json"})
        async for data in raw:
            reader.feed(data)
    stored = [(e.seq, e.chunk) for e in await event_log.read_events("outlet-live", 0, 100)]
    assert reader.events == stored[:13]
    assert [seq for seq, _ in reader.events] == list(range(1, 14))
    after = await scrape(http)
    assert delta(before, after, SENT, {"by": "follower"}) == 3
    assert delta(before, after, SENT, {"by": "commit"}) == 10


async def test_follower_when_commits_race_its_catch_up_then_every_event_arrives_once_in_order(
    served: Served, http: httpx.AsyncClient
) -> None:
    run = "/v1/runs/outlet-race"
    await http.post(f"{run}/events", json={"events": _chunks(0, 1)})
    total = 1

    async def produce() -> None:
        nonlocal total
        # Appends of varied sizes, back to back, while followers join and read.
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as producer:
            for size in [1, 5, 1, 40, 1, 1, 300, 2, 1, 17] * 6:
                await producer.post(f"{run}/events", json={"events": _chunks(total, size)})
                total += size
            await producer.post(f"{run}/close", headers={"Content-Type": "application/json"})

    async def follow() -> list[int]:
        reader = SseReader()
        async with http.stream("GET", f"{run}/stream") as response:
            async for data in response.aiter_raw():
                reader.feed(data)
        return [seq for seq, _ in reader.events]

    followers = [asyncio.create_task(follow()) for _ in range(4)]
    await produce()
    seen = await asyncio.gather(*followers)
    for seqs in seen:
        assert seqs == list(range(1, total + 1))


async def test_follower_when_its_window_fills_under_commit_writes_then_its_task_takes_over(
    served: Served, http: httpx.AsyncClient, event_log: EventLog
) -> None:
    run = "outlet-slow"
    await http.post(f"/v1/runs/{run}/events", json={"events": _chunks(0, 1)})
    before = await scrape(http)
    # Not read while 400 single-event commits of 30 KB each (12 MB, past what the kernel
    # buffers) arrive: a commit's write suspends, the follower's task finishes it and
    # sends the rest itself.
    appends = [_chunks(n, 1, "y" * 30_000)[0] for n in range(1, 401)]
    reader = await _stalled_follower(served, http, run, "", appends)
    stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, 500)]
    assert reader.events == stored  # every one once, in order
    assert [seq for seq, _ in reader.events] == list(range(1, 402))
    after = await scrape(http)
    assert delta(before, after, SENT, {"by": "commit"}) >= 1
    assert delta(before, after, SENT, {"by": "follower"}) >= 2


async def test_decoded_follower_when_its_window_fills_then_each_event_is_decoded_once(
    served: Served, http: httpx.AsyncClient
) -> None:
    # `?view=decoded` frames through a stateful decoder: a blob the commit framed
    # but could not write must go out as it is, never framed a second time.
    run = "outlet-decoded"
    path = f"/v1/runs/{run}/stream?view=decoded"
    start = {"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "search"}
    await http.post(f"/v1/runs/{run}/events", json={"events": [start]})
    # Argument pieces of 60 KB each (9 MB): the window fills on one, the next is framed,
    # then refused.
    big = "z" * 60_000
    pieces = ['{"terms": ['] + [f'"{n} {big}", ' for n in range(1, 150)] + ['"last"]}']
    appends = [{"type": "TOOL_CALL_ARGS", "toolCallId": "t1", "delta": p} for p in pieces]
    slow = await _stalled_follower(served, http, run, "?view=decoded", appends)
    # The same view of the closed run, read from the start by a follower that keeps up.
    fresh = SseReader()
    async with http.stream("GET", path) as response:
        async for data in response.aiter_raw():
            fresh.feed(data)
    assert len(fresh.events) == 1 + len(pieces)
    assert slow.events == fresh.events
    assert '"path":"/terms/149","text":"last"' in fresh.events[-1][1]


async def test_ai_sdk_follower_when_caught_up_then_live_events_are_encoded_by_the_commit(
    http: httpx.AsyncClient,
) -> None:
    # The re-encoded streams take the outlet too: their framer is stateful (the UI
    # message stream's encoder), and each event is encoded once, in order.
    run, chat = "/v1/runs/outlet-ai", "chat-outlet"
    opening = [
        {"type": "RUN_STARTED", "threadId": chat, "runId": "outlet-ai"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
    ]
    await http.post(f"{run}/events", json={"events": opening})
    before = await scrape(http)
    words = [f"word{n} " for n in range(12)]
    body = b""
    async with http.stream("GET", f"/v1/ai-sdk/demo/{chat}/stream") as response:
        assert response.status_code == 200
        raw = response.aiter_raw()
        while b'"text-start"' not in body:
            body += await anext(raw)
        for word in words:  # each read before the next: the follower waits caught up
            token = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": word}
            await http.post(f"{run}/events", json={"events": [token]})
            while f'"delta":"{word}"'.encode() not in body:
                body += await anext(raw)
        ending = [
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": chat, "runId": "outlet-ai"},
        ]
        await http.post(f"{run}/events", json={"events": ending, "close": True})
        async for data in raw:
            body += data
    assert body.endswith(b"data: [DONE]\n\n")
    deltas = [body.index(f'"delta":"{word}"'.encode()) for word in words]
    assert deltas == sorted(deltas) and all(body.count(w.encode()) == 1 for w in words)
    after = await scrape(http)
    assert delta(before, after, SENT, {"by": "commit"}) >= len(words)
