"""`GET /v1/threads/{id}/stream` on one process: announcements, events, cursors, waiting.

The stream never ends by itself, so each test reads until what it expects has
arrived (under a deadline that fails it otherwise) and then leaves.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from agent_replay.log import EventLog
from tests.conftest import settings_for
from tests.stream.conftest import Served, serve_app
from tests.stream.thread_wire import Item, ThreadNdjsonReader, ThreadSseReader, split_cursor

DEADLINE = 30.0
JSON_TYPE = {"Content-Type": "application/json"}


def _thread() -> str:
    return f"th-{uuid.uuid4().hex[:12]}"


async def _put_run(http: httpx.AsyncClient, run: str, thread: str) -> None:
    r = await http.put(f"/v1/runs/{run}", json={"thread_id": thread})
    assert r.status_code == 201, r.text


async def _append(http: httpx.AsyncClient, run: str, deltas: list[str], close: bool) -> None:
    events = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d} for d in deltas]
    r = await http.post(f"/v1/runs/{run}/events", json={"events": events, "close": close})
    assert r.status_code == 200, r.text


async def _read(
    http: httpx.AsyncClient,
    path: str,
    reader: ThreadSseReader | ThreadNdjsonReader,
    done: Callable[[], bool],
    headers: dict[str, str] | None = None,
    on_open: Callable[[], Any] | None = None,
) -> None:
    """Read the stream until `done()`; `on_open` runs once the response has begun."""
    async with asyncio.timeout(DEADLINE):
        async with http.stream("GET", path, headers=headers or {}) as r:
            assert r.status_code == 200, (await r.aread()).decode()
            if on_open is not None:
                await on_open()
            async for data in r.aiter_raw():
                reader.feed(data)
                if done():
                    return
    raise AssertionError("the thread stream ended")


def _runs(items: list[Item]) -> list[str]:
    return [data for _, kind, data in items if kind == "run"]


def _deltas(items: list[Item]) -> list[str]:
    return [json.loads(data)["delta"] for _, kind, data in items if kind == "event"]


async def test_thread_stream_when_runs_follow_each_other_then_each_announced_before_its_events(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    await _put_run(http, f"{thread}-1", thread)
    await _append(http, f"{thread}-1", ["a", "b"], close=True)
    await _put_run(http, f"{thread}-2", thread)
    await _append(http, f"{thread}-2", ["c"], close=False)
    reader = ThreadSseReader()
    await _read(http, f"/v1/threads/{thread}/stream", reader, lambda: len(reader.items) >= 5)
    assert reader.items == [
        (f"{thread}-1:0", "run", f"{thread}-1"),
        (f"{thread}-1:1", "event", '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"a"}'),
        (f"{thread}-1:2", "event", '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"b"}'),
        (f"{thread}-2:0", "run", f"{thread}-2"),
        (f"{thread}-2:1", "event", '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"c"}'),
    ]
    assert reader.retry == 1


async def test_thread_stream_when_thread_has_no_run_then_200_heartbeats_and_later_runs_arrive(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    reader = ThreadSseReader()
    # Runs are made only once the idle stream has sent a heartbeat.
    started = asyncio.Event()

    async def produce() -> None:
        await started.wait()
        await _put_run(http, f"{thread}-x", thread)
        await _append(http, f"{thread}-x", ["1", "2"], close=True)
        await _put_run(http, f"{thread}-y", thread)
        await _append(http, f"{thread}-y", ["3"], close=False)

    def done() -> bool:
        if reader.comments and not started.is_set():
            assert reader.items == [], "nothing but heartbeats before the first run"
            started.set()
        return len(reader.items) >= 5

    task = asyncio.create_task(produce())
    try:
        await _read(http, f"/v1/threads/{thread}/stream", reader, done)
    finally:
        await task
    assert _runs(reader.items) == [f"{thread}-x", f"{thread}-y"]
    assert _deltas(reader.items) == ["1", "2", "3"]


async def test_thread_stream_when_run_is_cut_before_its_first_event_then_still_announced(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    reader = ThreadNdjsonReader()

    async def produce() -> None:
        await _put_run(http, f"{thread}-cut", thread)
        r = await http.post(f"/v1/runs/{thread}-cut/close", headers=JSON_TYPE)
        assert r.status_code == 200, r.text
        await _put_run(http, f"{thread}-next", thread)
        await _append(http, f"{thread}-next", ["n"], close=False)

    await _read(
        http,
        f"/v1/threads/{thread}/stream",
        reader,
        lambda: len(reader.items) >= 3,
        headers={"Accept": "application/x-ndjson"},
        on_open=produce,
    )
    assert reader.items[0] == (f"{thread}-cut:0", "run", f"{thread}-cut")
    assert reader.items[1] == (f"{thread}-next:0", "run", f"{thread}-next")
    assert reader.items[2][:2] == (f"{thread}-next:1", "event")


async def test_thread_stream_when_resumed_at_any_cursor_then_exactly_what_follows_it(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    # Run ids with colons: the cursor splits at its last colon.
    first, second = f"{thread}:a:1", f"{thread}:b"
    await _put_run(http, first, thread)
    await _append(http, first, ["a1", "a2", "a3"], close=True)
    await _put_run(http, second, thread)
    await _append(http, second, ["b1", "b2"], close=False)
    whole = ThreadSseReader()
    path = f"/v1/threads/{thread}/stream"
    await _read(http, path, whole, lambda: len(whole.items) >= 7)
    assert [cursor for cursor, _, _ in whole.items] == [
        f"{first}:0", f"{first}:1", f"{first}:2", f"{first}:3",
        f"{second}:0", f"{second}:1", f"{second}:2",
    ]  # fmt: skip
    # From every cursor (an announcement, mid-run, after a run's last event), with
    # Last-Event-ID and with ?offset=, the rest and nothing else.
    for at, (cursor, _, _) in enumerate(whole.items[:-1]):
        rest = whole.items[at + 1 :]
        for how in ("header", "query"):
            resumed = ThreadSseReader()
            await _read(
                http,
                path if how == "header" else f"{path}?offset={cursor}",
                resumed,
                lambda rest=rest, resumed=resumed: len(resumed.items) >= len(rest),  # type: ignore[misc]
                headers={"Last-Event-ID": cursor} if how == "header" else None,
            )
            assert resumed.items == rest, (cursor, how)


async def test_thread_stream_when_offset_is_now_then_only_later_events_and_runs(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    await _put_run(http, f"{thread}-old", thread)
    await _append(http, f"{thread}-old", ["old"], close=False)
    reader = ThreadSseReader()

    async def produce() -> None:
        await _append(http, f"{thread}-old", ["later"], close=True)
        await _put_run(http, f"{thread}-new", thread)
        await _append(http, f"{thread}-new", ["new"], close=False)

    await _read(
        http,
        f"/v1/threads/{thread}/stream?offset=now",
        reader,
        lambda: len(reader.items) >= 3,
        on_open=produce,
    )
    assert [item[:2] for item in reader.items] == [
        (f"{thread}-old:2", "event"), (f"{thread}-new:0", "run"), (f"{thread}-new:1", "event"),
    ]  # fmt: skip


async def test_thread_stream_when_offset_is_now_with_runs_open_then_each_goes_on_from_its_end(
    http: httpx.AsyncClient,
) -> None:
    """`now` with two runs open: the earlier one's later events still come (it is
    followed from its last event), and so do the later one's."""
    thread = _thread()
    first, second = f"{thread}-1", f"{thread}-2"
    for run in (first, second):
        await _put_run(http, run, thread)
        await _append(http, run, ["old"], close=False)
    reader = ThreadSseReader()

    async def produce() -> None:
        await _append(http, first, ["one"], close=False)
        await _append(http, second, ["two"], close=False)

    await _read(
        http,
        f"/v1/threads/{thread}/stream?offset=now",
        reader,
        lambda: len(reader.items) >= 2,
        on_open=produce,
    )
    assert reader.items == [
        (f"{first}:2~{second}:1", "event", _chunk("one")),
        (f"{second}:2~{first}:2", "event", _chunk("two")),
    ]


async def test_thread_stream_when_types_filtered_and_named_then_ids_still_name_the_run(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    run = f"{thread}-f"
    await _put_run(http, run, thread)
    r = await http.post(
        f"/v1/runs/{run}/events",
        json={
            "events": [
                {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"},
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
            ]
        },
    )
    assert r.status_code == 200, r.text
    got: list[str] = []
    async with asyncio.timeout(DEADLINE):
        async with http.stream(
            "GET", f"/v1/threads/{thread}/stream?types=TEXT_MESSAGE_CONTENT&events=named"
        ) as resp:
            buffer = b""
            async for data in resp.aiter_raw():
                buffer += data
                if buffer.count(b"\n\n") >= 4:  # retry, announcement, the event, the id-only
                    break
    got = buffer.decode().split("\n\n")[:4]
    assert got[1].startswith(f"id: {run}:0\nevent: run\n")
    assert got[2] == (
        f"id: {run}:2\nevent: TEXT_MESSAGE_CONTENT\n"
        'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}'
    )
    assert got[3] == f"id: {run}:3"


async def test_thread_stream_when_cursor_is_wrong_then_refused_before_any_byte(
    http: httpx.AsyncClient,
) -> None:
    thread, other = _thread(), _thread()
    await _put_run(http, f"{thread}-r", thread)
    await _append(http, f"{thread}-r", ["a"], close=False)
    await _put_run(http, f"{other}-r", other)
    cases = [
        ("nonsense", 400, "invalid_offset"),
        (f"{thread}-r", 400, "invalid_offset"),  # no seq
        (f"{other}-r:0", 409, "cursor_not_in_thread"),
        (f"{thread}-missing:0", 409, "cursor_not_in_thread"),
        (f"{thread}-r:2", 409, "offset_out_of_range"),
    ]
    for cursor, status, code in cases:
        r = await http.get(f"/v1/threads/{thread}/stream", headers={"Last-Event-ID": cursor})
        assert (r.status_code, r.json()["error"]["code"]) == (status, code), cursor


async def test_thread_stream_when_a_run_is_made_then_every_follower_is_woken_by_its_notice(
    served: Served, http: httpx.AsyncClient
) -> None:
    """The hub hears the creation through LISTEN: with the slow re-check far away, a
    follower still gets the run (the served fixture re-checks every second, so this
    only shows the notice path works, not that it is fast)."""
    thread = _thread()
    readers = [ThreadSseReader() for _ in range(3)]

    async def follow(reader: ThreadSseReader) -> None:
        await _read(http, f"/v1/threads/{thread}/stream", reader, lambda: len(reader.items) >= 2)

    followers = [asyncio.create_task(follow(reader)) for reader in readers]
    # Made once every follower watches the thread.
    async with asyncio.timeout(DEADLINE):
        while len(served.hub._threads.get(_key(thread), ())) < 3:  # noqa: ASYNC110
            await asyncio.sleep(0.01)
    await _put_run(http, f"{thread}-w", thread)
    await _append(http, f"{thread}-w", ["w"], close=False)
    await asyncio.gather(*followers)
    for reader in readers:
        assert _runs(reader.items) == [f"{thread}-w"] and _deltas(reader.items) == ["w"]


def _key(thread: str) -> str:
    from agent_replay.log.notifications import thread_key

    return thread_key(thread)


async def test_thread_stream_when_a_run_is_forked_then_the_fork_is_announced_with_its_events(
    http: httpx.AsyncClient,
) -> None:
    """ "Retry from here": a fork is a run of its source's thread, made under the thread's
    lock like any other; its stream starts with the source's events it shares."""
    thread = _thread()
    source = f"{thread}-src"
    await _put_run(http, source, thread)
    await _append(http, source, ["s1", "s2", "s3"], close=True)
    reader = ThreadSseReader()

    async def fork() -> None:
        r = await http.post(
            f"/v1/runs/{source}/fork", json={"run_id": f"{thread}-fork", "at_seq": 2}
        )
        assert r.status_code == 201, r.text
        await _append(http, f"{thread}-fork", ["f3"], close=False)

    await _read(
        http,
        f"/v1/threads/{thread}/stream",
        reader,
        lambda: len(reader.items) >= 8,
        on_open=fork,
    )
    assert _runs(reader.items) == [source, f"{thread}-fork"]
    assert _deltas(reader.items) == ["s1", "s2", "s3", "s1", "s2", "f3"]
    assert reader.items[4][0] == f"{thread}-fork:0"


async def test_thread_stream_when_the_run_it_resumed_after_is_pruned_then_the_next_still_arrives(
    http: httpx.AsyncClient, event_log: EventLog
) -> None:
    """The follower holds the run's place in the thread, not just its id: retention
    deleting the run it stands after does not lose the runs after it."""
    thread = _thread()
    gone = f"{thread}-gone"
    await _put_run(http, gone, thread)
    await _append(http, gone, ["old"], close=True)
    reader = ThreadSseReader()

    async def prune_then_start() -> None:
        later = datetime.now(UTC) + timedelta(seconds=1)
        await event_log.prune(later, whole_months=False)
        assert await event_log.find_run(gone) is None
        await _put_run(http, f"{thread}-next", thread)
        await _append(http, f"{thread}-next", ["new"], close=False)

    await _read(
        http,
        f"/v1/threads/{thread}/stream",
        reader,
        lambda: len(reader.items) >= 2,
        headers={"Last-Event-ID": f"{gone}:1"},
        on_open=prune_then_start,
    )
    assert _runs(reader.items) == [f"{thread}-next"] and _deltas(reader.items) == ["new"]


def _reached(reader: ThreadSseReader, cursor: str) -> Callable[[], bool]:
    return lambda: bool(reader.items) and reader.items[-1][0] == cursor


def _typed(items: list[Item], path: str) -> str:
    """The text the decoded view typed at `path` (`view=decoded` frames, in order)."""
    text = ""
    for _, kind, data in items:
        if kind == "event":
            for piece in (json.loads(data).get("decoded") or {}).get("pieces", []):
                if piece["path"] == path:
                    text += piece.get("text", "")
    return text


async def test_thread_stream_when_view_decoded_resumed_mid_arguments_then_typing_continues_exactly(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    run = f"{thread}-1"
    content = 'print("a\\nb")\n' * 4
    arguments = json.dumps({"filePath": "a.py", "content": content})
    deltas = [arguments[i : i + 7] for i in range(0, len(arguments), 7)]
    chunks = [
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "write_file"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": d} for d in deltas),
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    ]
    await _put_run(http, run, thread)
    r = await http.post(f"/v1/runs/{run}/events", json={"events": chunks, "close": True})
    assert r.status_code == 200, r.text
    last = f"{run}:{len(chunks)}"
    whole = ThreadSseReader()
    path = f"/v1/threads/{thread}/stream?view=decoded"
    await _read(http, path, whole, _reached(whole, last))
    assert _typed(whole.items, "/content") == content
    for cut in (2, len(chunks) // 2, len(chunks) - 2):
        before = [item for item in whole.items if int(item[0].rpartition(":")[2]) <= cut]
        rest = ThreadSseReader()
        await _read(
            http,
            path,
            rest,
            _reached(rest, last),
            headers={"Last-Event-ID": f"{run}:{cut}"},
        )
        after = [item for item in rest.items if item[1] == "event"]
        assert [c for c, _, _ in after] == [
            f"{run}:{seq}" for seq in range(cut + 1, len(chunks) + 1)
        ]
        assert _typed(before, "/content") + _typed(after, "/content") == content, cut


def _cursors(reader: ThreadSseReader | ThreadNdjsonReader) -> list[str]:
    return [cursor for cursor, _, _ in reader.items]


async def test_thread_stream_when_run_accepted_while_previous_open_then_announced_at_once(
    http: httpx.AsyncClient,
) -> None:
    """Neither run is ever closed: the second is announced while the first is open and
    before its own first event, and their events interleave as they are appended, each
    frame's id naming its own run first, then the other's place."""
    thread = _thread()
    first, second, third = f"{thread}-1", f"{thread}-2", f"{thread}-3"
    await _put_run(http, first, thread)
    await _append(http, first, ["a"], close=False)
    reader = ThreadSseReader()
    steps: list[tuple[int, Callable[[], Awaitable[None]]]] = [
        # (items the reader must hold first, what the producer does then)
        (2, lambda: _put_run(http, second, thread)),
        (3, lambda: _append(http, first, ["b"], close=False)),
        (4, lambda: _append(http, second, ["c"], close=False)),
        (5, lambda: _put_run(http, third, thread)),
        (6, lambda: _append(http, third, ["d"], close=False)),
        (7, lambda: _append(http, first, ["e"], close=False)),
    ]
    pending = list(steps)

    async def drive() -> None:
        while pending:
            need, act = pending[0]
            async with asyncio.timeout(DEADLINE):
                while len(reader.items) < need:  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            # Nothing more arrived before the producer acted.
            assert len(reader.items) == need, reader.items
            pending.pop(0)
            await act()

    task = asyncio.create_task(drive())
    try:
        await _read(http, f"/v1/threads/{thread}/stream", reader, lambda: len(reader.items) >= 8)
    finally:
        await task
    assert reader.items == [
        (f"{first}:0", "run", first),
        (f"{first}:1", "event", _chunk("a")),
        (f"{second}:0~{first}:1", "run", second),
        (f"{first}:2~{second}:0", "event", _chunk("b")),
        (f"{second}:1~{first}:2", "event", _chunk("c")),
        (f"{third}:0~{first}:2~{second}:1", "run", third),
        (f"{third}:1~{first}:2~{second}:1", "event", _chunk("d")),
        (f"{first}:3~{second}:1~{third}:1", "event", _chunk("e")),
    ]
    # From each of those ids, on a new connection: exactly what followed it.
    path = f"/v1/threads/{thread}/stream"
    for at, (cursor, _, _) in enumerate(reader.items[:-1]):
        rest = reader.items[at + 1 :]
        resumed = ThreadSseReader()
        await _read(
            http,
            path,
            resumed,
            lambda rest=rest, resumed=resumed: len(resumed.items) >= len(rest),  # type: ignore[misc]
            headers={"Last-Event-ID": cursor},
        )
        # Runs followed side by side come interleaved as they are read, each in order:
        # what each frame is (its id's first entry) is compared, not the others' places.
        got, want = _own(resumed.items), _own(rest)
        assert sorted(got) == sorted(want), cursor
        for run in (first, second, third):
            assert [g for g in got if g[0] == run] == [w for w in want if w[0] == run], cursor


def _own(items: list[Item]) -> list[tuple[str, int, str, str]]:
    """Each frame's own run and seq (its id's first entry), kind and data."""
    out = []
    for cursor, kind, data in items:
        run_id, seq = split_cursor(cursor)
        out.append((run_id, seq, kind, data))
    return out


def _chunk(delta: str) -> str:
    return f'{{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"{delta}"}}'


async def test_thread_stream_when_a_run_closes_then_it_leaves_the_cursor_and_resumes_skip_it(
    http: httpx.AsyncClient,
) -> None:
    thread = _thread()
    first, second = f"{thread}-1", f"{thread}-2"
    await _put_run(http, first, thread)
    await _append(http, first, ["a"], close=False)
    await _put_run(http, second, thread)
    await _append(http, second, ["b"], close=False)
    reader = ThreadNdjsonReader()

    async def produce() -> None:
        await _append(http, first, ["a2"], close=True)
        await _append(http, second, ["b2"], close=False)

    ndjson = {"Accept": "application/x-ndjson"}
    await _read(
        http,
        f"/v1/threads/{thread}/stream",
        reader,
        lambda: len(reader.items) >= 2,
        headers={**ndjson, "Last-Event-ID": f"{second}:1~{first}:1"},
        on_open=produce,
    )
    # The first run is closed and delivered after its frame: it leaves the cursor.
    assert _cursors(reader) == [f"{first}:2~{second}:1", f"{second}:2"]
    assert _deltas(reader.items) == ["a2", "b2"]
    # Resumed from there, nothing of the first run again; the second goes on.
    rest = ThreadNdjsonReader()
    await _read(
        http,
        f"/v1/threads/{thread}/stream",
        rest,
        lambda: len(rest.items) >= 1,
        headers={**ndjson, "Last-Event-ID": f"{second}:2"},
        on_open=lambda: _append(http, second, ["b3"], close=False),
    )
    assert rest.items == [(f"{second}:3", "event", _chunk("b3"))]


async def test_thread_stream_when_cursor_names_many_runs_wrongly_then_refused_before_any_byte(
    http: httpx.AsyncClient,
) -> None:
    thread, other = _thread(), _thread()
    await _put_run(http, f"{thread}-r", thread)
    await _append(http, f"{thread}-r", ["a"], close=False)
    await _put_run(http, f"{thread}-s", thread)
    await _put_run(http, f"{other}-r", other)
    ok = f"{thread}-r:1~{thread}-s:0"
    many = "~".join(f"{thread}-r{i}:0" for i in range(33))
    cases = [
        (f"{ok}~", 400, "invalid_offset"),
        (f"{thread}-r:1~{thread}-r:0", 400, "invalid_offset"),  # a run twice
        (many, 400, "cursor_too_large"),
        (f"{ok}~{other}-r:0", 409, "cursor_not_in_thread"),
        (f"{thread}-s:0~{thread}-r:2", 409, "offset_out_of_range"),
    ]
    for cursor, status, code in cases:
        for how in ("header", "query"):
            r = await http.get(
                f"/v1/threads/{thread}/stream",
                headers={"Last-Event-ID": cursor} if how == "header" else {},
                params={"offset": cursor} if how == "query" else {},
            )
            assert r.headers["content-type"] == "application/json", (cursor, how)
            assert (r.status_code, r.json()["error"]["code"]) == (status, code), (cursor, how)


async def test_thread_stream_when_the_process_drains_with_runs_open_then_it_ends_cleanly(
    database_url: str,
) -> None:
    """Two runs open side by side, never closed: a drain ends the stream at once (the
    client resumes elsewhere from its last id), not when the runs end."""
    thread = _thread()
    settings = settings_for(database_url, heartbeat_seconds=0.3)
    async with (
        serve_app(settings) as own,
        httpx.AsyncClient(base_url=own.base_url, timeout=30) as client,
    ):
        for run in (f"{thread}-1", f"{thread}-2"):
            await _put_run(client, run, thread)
            await _append(client, run, ["x"], close=False)
        reader = ThreadSseReader()
        async with asyncio.timeout(DEADLINE):
            async with client.stream("GET", f"/v1/threads/{thread}/stream") as r:
                assert r.status_code == 200
                async for data in r.aiter_raw():
                    reader.feed(data)
                    if len(reader.items) == 4 and not own.hub.draining:
                        own.hub.drain()
                # The body ended by itself: the drain, nothing else, ended it.
        assert own.hub.draining
        assert _runs(reader.items) == [f"{thread}-1", f"{thread}-2"]
        assert _deltas(reader.items) == ["x", "x"]
