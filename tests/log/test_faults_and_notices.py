"""The log's single definitions: driver-error translation, the notification codec, queries.sql."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_replay.errors import Unavailable, Unstorable
from agent_replay.log import EventLog
from agent_replay.log.chunks import storable, stored
from agent_replay.log.listener import register
from agent_replay.log.notifications import (
    CHANNEL,
    READERS_CHANNEL,
    THREADS_CHANNEL,
    decode,
    decode_threads,
    encode,
    thread_key,
)
from agent_replay.log.request import Group, Pending
from agent_replay.log.sql import QUERIES, SOURCE, parse
from agent_replay.log.values import Notice
from tests.support.servers import free_port

DEADLINE = 10.0

run_ids = st.text("abcXYZ019._:-", min_size=1, max_size=128)
notices = st.lists(st.builds(Notice, run_ids, st.integers(0, 2**63 - 1), st.booleans()))


@given(notices)
def test_notice_payload_when_encoded_then_decodes_to_the_same_notices(sent: list[Notice]) -> None:
    assert decode(encode(sent)) == sent


def test_notice_payload_when_line_malformed_then_only_that_line_skipped() -> None:
    payload = "run-1 5\nrun-2 x\nrun-3 7 c\nrun-4 8 q\n\nrun-5 ９"
    assert decode(payload) == [Notice("run-1", 5, False), Notice("run-3", 7, True)]


@given(st.lists(st.text(min_size=1), max_size=5))
def test_thread_payload_when_keys_joined_then_each_key_decodes_and_nothing_else(
    threads: list[str],
) -> None:
    keys = [thread_key(storable(t)) for t in threads]
    assert decode_threads("\n".join([*keys, "", "not a key", "x" * 32 + " "])) == keys


async def test_thread_key_when_any_thread_id_then_what_postgresql_md5_makes_of_it_stored(
    event_log: EventLog,
) -> None:
    threads = ["t-1", "é thread ✓", "emoji 🧵", "nul \u0000 inside", "lone \ud800 half",
               "line\nbreak", "x" * 10_000]  # fmt: skip
    for thread in threads:
        kept = storable(thread)
        async with event_log.pool.acquire() as conn:
            assert await conn.fetchval("SELECT md5($1::text)", kept) == thread_key(kept)


async def _notices_until_closed(
    listening: EventLog, appending: EventLog, run_id: str
) -> list[Notice]:
    """What `listening`'s listener hears of two appends by `appending`, the second closing
    the run: everything up to that close (one connection delivers in commit order)."""
    received: list[Notice] = []
    arrived = asyncio.Event()

    def on_notices(batch: list[Notice]) -> None:
        received.extend(batch)
        if any(n.run_id == run_id and n.closed for n in batch):
            arrived.set()

    listener = await listening.listen(on_notices, lambda: None)
    try:
        assert listener.listening and CHANNEL.endswith("_v2")
        await appending.append(run_id, [{"type": "A"}, {"type": "B"}])
        await appending.append(run_id, [{"type": "C"}], close=True)
        async with asyncio.timeout(DEADLINE):
            await arrived.wait()
    finally:
        await listener.stop()
    return [n for n in received if n.run_id == run_id]


async def test_append_when_committed_by_another_process_then_listener_decodes_each_notice(
    event_log: EventLog, database_url: str
) -> None:
    async with EventLog.connect(database_url) as other:
        heard = await _notices_until_closed(event_log, other, "notice-1")
    assert heard == [Notice("notice-1", 2, False), Notice("notice-1", 3, True)]


async def test_append_when_committed_by_own_pool_then_listener_passes_only_the_close(
    event_log: EventLog,
) -> None:
    # The hooks told this process of both commits already; the close still reaches the
    # close hooks (a driver stops at a close, whoever made it).
    heard = await _notices_until_closed(event_log, event_log, "notice-own")
    assert heard == [Notice("notice-own", 3, True)]


@pytest.mark.parametrize(
    ("kind", "count"),
    [("A", 1), ("TOOL_CALL_START", 1), ("A", 2), ("TOOL_CALL_START", 2), ("RUN_FINISHED", 1)],
)
async def test_group_of_many_runs_when_committed_then_each_notified_once_forty_to_a_notify(
    database_url: str, event_log: EventLog, kind: str, count: int
) -> None:
    """A group of more runs than one payload holds (ids of the longest kind), each run
    bringing one chunk or two, the first run's a plain one, a tool call's start or a run's
    end that closes it: every run it changed is in exactly one notification, at its new
    last seq, its close marked; no notification holds more than 40 lines or reaches
    PostgreSQL's 8,000-byte cap on a payload."""
    loop = asyncio.get_running_loop()
    runs = [f"{kind[:4]}-{count}-{i:03d}-".ljust(128, "n") for i in range(97)]
    appends = {}
    for index, run in enumerate(runs):
        chunks = [{"type": kind if index == 0 else "A", "toolCallName": "t"}] * count
        close = kind == "RUN_FINISHED" and index == 0
        appends[run] = [Pending(run, [stored(chunk, i) for i, chunk in enumerate(chunks)],
                                None, close, False, None, loop.create_future())]  # fmt: skip
    statement, params = Group.of(appends).statement()
    payloads: list[str] = []
    heard = asyncio.Event()
    listening = await asyncpg.connect(database_url)
    committing = await asyncpg.connect(database_url)
    try:
        await committing.executemany(
            "INSERT INTO runs (run_id, last_seq) VALUES ($1, 4)", [(r,) for r in runs]
        )

        def on_payload(_conn: object, _pid: int, _channel: str, payload: str) -> None:
            payloads.append(payload)
            if sum(len(decode(p)) for p in payloads) >= len(runs):
                heard.set()

        await listening.add_listener(CHANNEL, on_payload)
        await register(listening, "another process")
        answer = await committing.fetch(statement, *params)
        assert {row["run_id"]: row["base"] for row in answer} == dict.fromkeys(runs, 4)
        async with asyncio.timeout(DEADLINE):
            await heard.wait()
    finally:
        await listening.close()
        await committing.close()
    assert all(len(p.split("\n")) <= 40 and len(p.encode()) < 8000 for p in payloads)
    assert len(payloads) == 3
    notified = [notice for p in payloads for notice in decode(p)]
    assert sorted(notified) == sorted(
        Notice(run, 4 + count, kind == "RUN_FINISHED" and index == 0)
        for index, run in enumerate(runs)
    )


async def test_open_when_database_unreachable_then_unavailable_without_driver_text() -> None:
    url = f"postgresql://root@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(Unavailable) as caught:
        await EventLog.open(url)
    assert isinstance(caught.value.__cause__, OSError)
    assert str(caught.value.__cause__) not in caught.value.message
    assert caught.value.body()["error"]["code"] == "unavailable"


async def test_create_run_when_metadata_unstorable_then_unstorable_422_chained_to_data_error(
    event_log: EventLog,
) -> None:
    with pytest.raises(Unstorable) as caught:
        await event_log.create_run("fault-1", metadata={"k": "nul \u0000"})
    assert isinstance(caught.value.__cause__, asyncpg.DataError)
    assert (caught.value.status, caught.value.code) == (422, "invalid_request")
    assert caught.value.message.startswith("metadata cannot be stored: ")
    assert await event_log.find_run("fault-1") is None


def test_queries_file_when_parsed_then_statements_are_literal_and_named_once() -> None:
    text = SOURCE.read_text("utf-8")
    assert list(QUERIES) == [line.split()[-1] for line in text.splitlines()
                             if line.startswith("-- name: ")]  # fmt: skip
    for name, statement in QUERIES.items():
        assert statement and not statement.endswith(";"), name
        assert "{" not in statement, f"{name} looks like a template"
    notifying = [name for name, statement in QUERIES.items() if "pg_notify" in statement]
    assert "append" in notifying and "readers_left" in notifying
    # Every statement that puts a run on a thread announces it on the threads channel.
    making = ["create_run", "create_run_if_missing", "stream_insert_run", "stream_set_thread"]
    assert set(making) <= set(notifying)
    assert all(THREADS_CHANNEL in QUERIES[name] for name in making)
    # Citus's readers' NOTIFY is a statement of its own (agent_replay.log.citus).
    on_readers = {"readers_left", "citus_notify_readers"}
    assert on_readers <= set(notifying)
    assert all(CHANNEL in QUERIES[name] for name in notifying if name not in (*on_readers, *making))
    assert all(READERS_CHANNEL in QUERIES[name] for name in on_readers)
    assert "replay_" not in text, "a channel's name is written in queries.sql"


@pytest.mark.parametrize(
    "text",
    ["-- name: a\nSELECT 1\n", "-- name: a\nSELECT 1;\n-- name: a\nSELECT 2;\n"],
)
def test_queries_file_when_block_unterminated_or_named_twice_then_refused(text: str) -> None:
    with pytest.raises(ValueError, match="unterminated or named twice"):
        parse(text)
