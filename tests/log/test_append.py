"""The log's append path, through the in-process writer (EventLog)."""

from __future__ import annotations

import asyncio
import json
import uuid
from itertools import chain
from typing import Any

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_replay.config import asyncpg_dsn
from agent_replay.errors import (
    InvalidEvent,
    InvalidRunId,
    ProducerRefused,
    RunClosed,
    RunNotFound,
    SeqConflict,
    Unavailable,
)
from agent_replay.ingest.verbatim import split_events
from agent_replay.log import EventLog
from agent_replay.log.chunks import Chunks, stored, stored_values
from agent_replay.log.request import Group, Pending


async def stored_texts(log: EventLog, run_id: str) -> list[str]:
    return [e.chunk for e in await log.read_events(run_id, 0, 100_000)]


async def test_append_when_run_missing_then_created_with_thread_from_run_started(
    event_log: EventLog,
) -> None:
    result = await event_log.append(
        "auto-1", [{"type": "RUN_STARTED", "threadId": "th-9", "runId": "auto-1"}]
    )
    run = await event_log.get_run("auto-1")
    assert (result.first_seq, result.last_seq) == (1, 1)
    assert (run.thread_id, run.status, run.last_seq, run.closed) == ("th-9", "running", 1, False)


async def test_append_when_create_false_and_run_missing_then_run_not_found(
    event_log: EventLog,
) -> None:
    with pytest.raises(RunNotFound):
        await event_log.append("absent-1", [{"type": "A"}], create=False)
    assert await event_log.find_run("absent-1") is None


async def _producer_state(log: EventLog, run_id: str) -> list[tuple[str, int, int]]:
    rows = await log.pool.fetch(
        "SELECT producer_id, epoch, seq FROM stream_producers WHERE run_id = $1", run_id
    )
    return [(r[0], r[1], r[2]) for r in rows]


async def test_append_when_producer_state_admits_then_appended_and_recorded_else_refused(
    event_log: EventLog,
) -> None:
    log = event_log
    await log.append("prod-1", [{"type": "A"}])
    first = await log.append("prod-1", [{"type": "B"}], create=False, producer=("p", 0, 0))
    nxt = await log.append("prod-1", [{"type": "C"}], create=False, producer=("p", 0, 1))
    refused = []
    for producer in (("p", 0, 1), ("p", 0, 3), ("p", 1, 2), ("q", 0, 5)):  # dup, gap, epoch, new
        with pytest.raises(ProducerRefused):
            await log.append("prod-1", [{"type": "X"}], create=False, producer=producer)
        refused.append(producer)
    bumped = await log.append("prod-1", [{"type": "D"}], create=False, producer=("p", 1, 0))
    assert (first.last_seq, nxt.last_seq, bumped.last_seq) == (2, 3, 4)
    assert [json.loads(t)["type"] for t in await stored_texts(log, "prod-1")] == list("ABCD")
    assert await _producer_state(log, "prod-1") == [("p", 1, 0)]


async def test_append_when_producer_state_changed_while_waiting_for_the_run_then_refused(
    event_log: EventLog, database_url: str
) -> None:
    """A guarded producer append (its own transaction, the run row locked) commits seq 1
    while the group's statement for the same seq 1 waits for the row: the statement's
    snapshot still shows seq 0, so only the run row having moved can tell it."""
    log = event_log
    await log.append("prod-race", [{"type": "A"}])
    await log.append("prod-race", [{"type": "B"}], create=False, producer=("p", 0, 0))
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'prod-race' FOR UPDATE")
        await other.execute(
            "UPDATE stream_producers SET seq = 1 WHERE run_id = 'prod-race' AND producer_id = 'p'"
        )
        await other.execute("UPDATE runs SET last_seq = last_seq + 1 WHERE run_id = 'prod-race'")
        await other.execute(
            "INSERT INTO events (run_id, seq, type, chunk, run_month) "
            "SELECT run_id, last_seq, 'C', '{\"type\":\"C\"}', run_month "
            "FROM runs WHERE run_id = 'prod-race'"
        )
        racing = asyncio.create_task(
            log.append("prod-race", [{"type": "C"}], create=False, producer=("p", 0, 1))
        )
        while not await other.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND query ~ '^WITH (locked|upd|rich) AS'"
        ):
            assert not racing.done(), racing
            await asyncio.sleep(0.01)
        await tx.commit()
        with pytest.raises(ProducerRefused):
            await racing
    finally:
        await other.close()
    assert [json.loads(t)["type"] for t in await stored_texts(log, "prod-race")] == list("ABC")
    assert await _producer_state(log, "prod-race") == [("p", 0, 1)]


async def test_append_when_created_at_names_another_life_of_run_then_not_found_nothing_stored(
    event_log: EventLog,
) -> None:
    await event_log.append("life-1", [{"type": "A"}])
    born = (await event_log.get_run("life-1")).created_at
    with pytest.raises(RunNotFound):
        await event_log.append(
            "life-1", [{"type": "B"}], create=False, created_at=born.replace(year=born.year - 1)
        )
    kept = await event_log.append("life-1", [{"type": "C"}], create=False, created_at=born)
    assert (kept.first_seq, kept.last_seq) == (2, 2)
    assert [json.loads(t)["type"] for t in await stored_texts(event_log, "life-1")] == ["A", "C"]


async def test_append_when_chunks_hold_nul_and_lone_surrogates_then_read_back_byte_equal(
    event_log: EventLog,
) -> None:
    # What a JavaScript producer really sends: an emoji split between deltas.
    raw = [
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\\ud83d"}',
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\\ude00 ok"}',
        '{"type":"CUSTOM","name":"x","value":"a\\u0000b","n":123456789012345678901234567890}',
        '{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"héllo \\u2028 ✓"}',
    ]
    chunks = [json.loads(text) for text in raw]
    await event_log.append("lossless-1", chunks)
    texts = await stored_texts(event_log, "lossless-1")
    # Byte-for-byte JSON text, decoded the way a client would: same values.
    assert [json.loads(t) for t in texts] == chunks
    assert "\\ud83d" in texts[0] and "\\u0000" in texts[2]
    assert "123456789012345678901234567890" in texts[2]


async def test_append_when_expected_seq_matches_then_appended_at_that_seq(
    event_log: EventLog,
) -> None:
    await event_log.append("exp-1", [{"type": "A"}])
    result = await event_log.append("exp-1", [{"type": "B"}, {"type": "C"}], expected_seq=2)
    assert (result.first_seq, result.last_seq) == (2, 3)


async def test_append_when_retry_of_stored_batch_then_same_answer_and_nothing_added(
    event_log: EventLog,
) -> None:
    batch = [{"type": "A", "x": 1}, {"type": "B", "y": [1, 2]}]
    first = await event_log.append("retry-1", batch, expected_seq=1)
    again = await event_log.append(
        "retry-1", [dict(reversed(c.items())) for c in batch], expected_seq=1
    )
    assert again == first
    assert len(await stored_texts(event_log, "retry-1")) == 2


async def test_append_when_retry_differs_then_seq_conflict_with_last_seq_and_nothing_added(
    event_log: EventLog,
) -> None:
    await event_log.append("retry-2", [{"type": "A", "x": 1}], expected_seq=1)
    before = await stored_texts(event_log, "retry-2")
    for other in ([{"type": "A", "x": True}], [{"type": "A", "x": 1}, {"type": "B"}]):
        with pytest.raises(SeqConflict) as caught:
            await event_log.append("retry-2", other, expected_seq=1)
        assert caught.value.extra["last_seq"] == 1
    with pytest.raises(SeqConflict):
        await event_log.append("retry-2", [{"type": "Z"}], expected_seq=5)
    assert await stored_texts(event_log, "retry-2") == before


async def test_append_when_expected_seq_taken_while_waiting_on_the_run_lock_then_seq_conflict(
    event_log: EventLog, database_url: str
) -> None:
    """The expected seq is checked on the run row as it is once its lock is granted, not
    as the statement's snapshot saw it: a commit that moved `last_seq` meanwhile makes the
    append a conflict, never an event stored past the seq its producer asked for."""
    await event_log.append("exp-race", [{"type": "A"}])
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'exp-race' FOR UPDATE")
        waiting = asyncio.create_task(event_log.append("exp-race", [{"type": "B"}], expected_seq=2))
        await _stalled_on_lock(other, "exp-race")
        # Another writer's commit takes seq 2 while the append waits for the row.
        await other.execute("UPDATE runs SET last_seq = 2 WHERE run_id = 'exp-race'")
        await tx.commit()
        with pytest.raises(SeqConflict) as caught:
            async with asyncio.timeout(10):
                await waiting
        assert caught.value.extra["last_seq"] == 2
        assert [json.loads(t)["type"] for t in await stored_texts(event_log, "exp-race")] == ["A"]
    finally:
        await other.close()


async def test_append_when_run_closed_then_run_closed_and_log_unchanged(
    event_log: EventLog,
) -> None:
    await event_log.append("closed-1", [{"type": "A"}])
    await event_log.close_run("closed-1")
    with pytest.raises(RunClosed):
        await event_log.append("closed-1", [{"type": "B"}])
    assert [e.type for e in await event_log.read_events("closed-1")] == ["A"]


async def test_close_when_repeated_then_idempotent_and_status_from_last_terminal(
    event_log: EventLog,
) -> None:
    await event_log.append("status-1", [{"type": "RUN_ERROR", "message": "boom"}])
    await event_log.append("status-1", [{"type": "RUN_FINISHED"}])
    first = await event_log.close_run("status-1")
    second = await event_log.close_run("status-1")
    assert (first.status, first.closed) == ("finished", True)
    assert second == first
    await event_log.append(
        "status-2", [{"type": "RUN_FINISHED"}, {"type": "RUN_ERROR", "message": "bad"}]
    )
    run = await event_log.close_run("status-2")
    assert (run.status, run.error_message) == ("error", "bad")


async def test_append_with_close_when_batch_carries_run_finished_then_closed_in_same_commit(
    event_log: EventLog,
) -> None:
    result = await event_log.append("close-in-1", [{"type": "RUN_FINISHED"}], close=True)
    run = await event_log.get_run("close-in-1")
    assert (result.last_seq, run.closed, run.status) == (1, True, "finished")


async def test_run_finished_chunk_when_appended_then_run_stays_open(event_log: EventLog) -> None:
    # An agent loop emits RUN_FINISHED once per iteration; only close() closes.
    await event_log.append("loop-1", [{"type": "RUN_FINISHED", "finishReason": "tool_calls"}])
    await event_log.append("loop-1", [{"type": "RUN_FINISHED", "finishReason": "stop"}])
    assert not (await event_log.get_run("loop-1")).closed


async def test_append_when_chunk_invalid_then_invalid_event_and_nothing_stored(
    event_log: EventLog,
) -> None:
    for bad in ({"type": ""}, {"no": "type"}, {"type": 3}, ["type"]):
        with pytest.raises(InvalidEvent):
            await event_log.append("invalid-1", [{"type": "OK"}, bad])  # type: ignore[list-item]
    assert await event_log.find_run("invalid-1") is None


async def test_append_when_run_id_malformed_then_invalid_run_id(event_log: EventLog) -> None:
    for bad in ("", "a b", "x" * 129, "é", "a/b"):
        with pytest.raises(InvalidRunId):
            await event_log.append(bad, [{"type": "A"}])


async def test_appends_when_racing_on_one_run_and_many_runs_then_seqs_dense_and_tail_sees_all_once(
    event_log: EventLog, database_url: str
) -> None:
    """20 producers on one run and 20 on their own runs, while a reader polls
    `seq > last` on the shared run: every seq 1..n exists once, and the reader,
    which only ever asks for what is after what it saw, misses nothing."""
    per_task = 40
    shared = "race-shared"
    done = asyncio.Event()
    seen: list[int] = []

    async def produce(run_id: str, tag: int) -> None:
        for i in range(per_task):
            await event_log.append(run_id, [{"type": "E", "tag": tag, "i": i}])

    async def tail() -> None:
        conn = await asyncpg.connect(database_url)
        try:
            last = 0
            while True:
                finished = done.is_set()
                rows = await conn.fetch(
                    "SELECT seq FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                    shared,
                    last,
                )
                for row in rows:
                    seen.append(row["seq"])
                    last = row["seq"]
                if finished and not rows:
                    return
                await asyncio.sleep(0)
        finally:
            await conn.close()

    reader = asyncio.create_task(tail())
    await asyncio.gather(
        *(produce(shared, t) for t in range(20)), *(produce(f"race-own-{t}", t) for t in range(20))
    )
    done.set()
    await reader

    total = 20 * per_task
    assert seen == list(range(1, total + 1))
    conn = await asyncpg.connect(database_url)
    try:
        for run_id in [shared, *(f"race-own-{t}" for t in range(20))]:
            seqs = [
                r["seq"]
                for r in await conn.fetch(
                    "SELECT seq FROM events WHERE run_id = $1 ORDER BY seq", run_id
                )
            ]
            assert seqs == list(range(1, len(seqs) + 1))
            assert (
                await conn.fetchval("SELECT last_seq FROM runs WHERE run_id = $1", run_id)
            ) == len(seqs)
        # Each producer's own appends kept their order.
        rows = await conn.fetch("SELECT chunk FROM events WHERE run_id = $1 ORDER BY seq", shared)
        by_tag: dict[int, list[int]] = {}
        for row in rows:
            chunk = json.loads(row["chunk"])
            by_tag.setdefault(chunk["tag"], []).append(chunk["i"])
        assert all(v == list(range(per_task)) for v in by_tag.values()) and len(by_tag) == 20
    finally:
        await conn.close()


async def test_appends_when_two_event_logs_race_on_one_run_then_seqs_dense(
    database_url: str,
) -> None:
    """Two writers (as two processes would have) share only the database."""
    logs = [await EventLog.open(database_url), await EventLog.open(database_url)]
    try:

        async def produce(log: EventLog, tag: int) -> None:
            for i in range(50):
                await log.append("race-two", [{"type": "E", "tag": tag, "i": i}, {"type": "F"}])

        await asyncio.gather(*(produce(logs[t % 2], t) for t in range(10)))
        events = await logs[0].read_events("race-two", 0, 10_000)
        assert [e.seq for e in events] == list(range(1, 1001))
        # Every batch stayed contiguous: an E is always followed by its F.
        assert all(events[i + 1].type == "F" for i in range(0, 1000, 2))
    finally:
        for log in logs:
            await log.close()


async def test_run_summary_when_tools_called_and_usage_reported_then_maintained_per_append(
    event_log: EventLog,
) -> None:
    await event_log.append(
        "summary-1",
        [
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search"},
            {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolName": "fetch"},
            {
                "type": "RUN_FINISHED",
                "usage": {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15},
            },
        ],
    )
    await event_log.append(
        "summary-1",
        [
            {"type": "TOOL_CALL_START", "toolCallId": "c3", "toolCallName": "search"},
            {
                "type": "RUN_FINISHED",
                "usage": {"promptTokens": 1, "completionTokens": 2, "totalTokens": 3},
            },
        ],
    )
    run = await event_log.get_run("summary-1")
    assert run.tool_names == ["fetch", "search"]
    assert (run.prompt_tokens, run.completion_tokens, run.total_tokens) == (11, 7, 18)
    assert run.to_json()["usage"] == {"promptTokens": 11, "completionTokens": 7, "totalTokens": 18}
    plain = await event_log.get_run((await event_log.append("summary-2", [{"type": "A"}])).run_id)
    assert (plain.tool_names, plain.to_json()["usage"]) == ([], None)


async def test_tool_calls_when_appended_alone_then_names_merge_distinct_and_sorted(
    event_log: EventLog,
) -> None:
    """Appends whose only thing to record is the tools called add each name once, sorted
    among the run's earlier ones, whichever append recorded those (and leave the rest of
    the summary as it was); a later plain append leaves them."""

    def start(call: str, name: str) -> dict[str, str]:
        return {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": name}

    run = "tools-merge-1"
    first = [start("c1", "search"), {"type": "RUN_STARTED", "threadId": "t"}]
    await event_log.append(run, first)
    calls = [start("c2", "fetch"), start("c3", "search"), start("c4", "lookup")]
    await asyncio.gather(*(event_log.append(run, [call]) for call in calls))
    await event_log.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}])
    summary = await event_log.get_run(run)
    assert summary.tool_names == ["fetch", "lookup", "search"]
    assert summary.last_seq == 6 and summary.last_terminal is None
    # A name the run has already changes nothing (no merge is run); a new one beside a
    # known one in the same append is merged all the same.
    await event_log.append(run, [start("c5", "search")])
    assert (await event_log.get_run(run)).tool_names == ["fetch", "lookup", "search"]
    await event_log.append(run, [start("c6", "lookup"), start("c7", "answer")])
    assert (await event_log.get_run(run)).tool_names == ["answer", "fetch", "lookup", "search"]
    # Names recorded beside a terminal chunk are merged with too, and what else that
    # append recorded is left as it was.
    ended = "tools-merge-2"
    finished = [start("c1", "search"), {"type": "RUN_FINISHED", "usage": {"totalTokens": 3}}]
    await event_log.append(ended, finished)
    await event_log.append(ended, [start("c2", "fetch")])
    after = await event_log.get_run(ended)
    assert after.tool_names == ["fetch", "search"]
    # Beside a terminal chunk, a known name is skipped and a new one merged the same way.
    known = [start("c3", "search"), {"type": "RUN_FINISHED", "usage": {"totalTokens": 1}}]
    await event_log.append(ended, known)
    assert (await event_log.get_run(ended)).tool_names == ["fetch", "search"]
    new = [start("c4", "browse"), {"type": "RUN_FINISHED", "usage": {"totalTokens": 1}}]
    await event_log.append(ended, new)
    after = await event_log.get_run(ended)
    assert after.tool_names == ["browse", "fetch", "search"]
    assert (after.last_terminal, after.total_tokens, after.last_seq) == ("RUN_FINISHED", 5, 7)


async def test_tool_calls_when_a_group_holds_a_thousand_rows_then_names_merge_the_same(
    database_url: str,
) -> None:
    """A group of a thousand rows and more (a row per event) merges a run's tool names as
    a small one does: a known name changes nothing, a new one is added in order."""
    log = await EventLog.open(database_url, batch_min=None)
    try:
        run = f"tools-large-{uuid.uuid4().hex[:6]}"

        def calls(*names: str) -> list[dict[str, Any]]:
            deltas = [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}] * 1000
            starts = [
                {"type": "TOOL_CALL_START", "toolCallId": f"c{i}", "toolCallName": name}
                for i, name in enumerate(names)
            ]
            return [*deltas, *starts]

        await log.append(run, calls("search"))
        await log.append(run, calls("search"))
        assert (await log.get_run(run)).tool_names == ["search"]
        await log.append(run, calls("search", "answer"))
        summary = await log.get_run(run)
        assert (summary.tool_names, summary.last_seq) == (["answer", "search"], 3004)
    finally:
        await log.close()


async def test_append_when_groups_large_then_order_text_summary_and_retries_kept(
    event_log: EventLog,
) -> None:
    """Big groups: the same numbering, text, summary and idempotence as small ones."""
    big = [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": f"{i} \ud83d"}
        for i in range(700)
    ]
    big.append({"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "search"})
    results = await asyncio.gather(
        event_log.append("large-1", big, expected_seq=1),
        event_log.append("large-2", [{"type": "A"}]),
        event_log.append("large-3", big[:300]),
    )
    assert [(r.first_seq, r.last_seq) for r in results] == [(1, 701), (1, 1), (1, 300)]
    stored = await event_log.read_events("large-1", 0, 10_000)
    assert [e.seq for e in stored] == list(range(1, 702))
    assert [json.loads(e.chunk) for e in stored] == big
    assert (await event_log.get_run("large-1")).tool_names == ["search"]
    again = await event_log.append("large-1", big, expected_seq=1)
    assert (again.first_seq, again.last_seq) == (1, 701)
    assert (await event_log.get_run("large-1")).last_seq == 701


@pytest.mark.parametrize("large", [False, True], ids=["small", "large"])
async def test_append_when_summary_values_unstorable_then_chunks_kept_and_summary_sanitized(
    event_log: EventLog, large: bool
) -> None:
    """NUL, lone surrogates and huge usage are valid in a chunk but not in a text or
    bigint column: the chunk is stored as sent, the summary made storable, and the
    producers sharing the group commit are not failed with it."""
    raw = [
        '{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"look\\u0000up"}',
        '{"type":"TOOL_CALL_START","toolCallId":"d","toolCallName":"half \\ud83d"}',
        f'{{"type":"RUN_FINISHED","usage":{{"totalTokens":{2**70},"promptTokens":-{2**70}}}}}',
        '{"type":"RUN_ERROR","message":"bad \\u0000 and \\udc00"}',
    ]
    chunks = [json.loads(text) for text in raw]
    padding = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x"}] * (
        1000 if large else 0
    )
    bad, neighbour = await asyncio.gather(
        event_log.append(f"unstorable-1-{large}", padding + chunks),
        event_log.append(f"unstorable-2-{large}", [{"type": "A"}]),
    )
    assert (bad.last_seq, neighbour.last_seq) == (len(padding) + 4, 1)
    texts = await stored_texts(event_log, f"unstorable-1-{large}")
    assert [json.loads(t) for t in texts[len(padding) :]] == chunks
    run = await event_log.get_run(f"unstorable-1-{large}")
    assert run.tool_names == ["half \ufffd", "look\ufffdup"]
    assert (run.total_tokens, run.prompt_tokens) == (2**63 - 1, -(2**63 - 1))
    assert (run.last_terminal, run.error_message) == ("RUN_ERROR", "bad \ufffd and \ufffd")
    # Summing past the bigint range saturates instead of failing the commit.
    await event_log.append(f"unstorable-1-{large}", [chunks[2]])
    assert (await event_log.get_run(f"unstorable-1-{large}")).total_tokens == 2**63 - 1


# Text that JSON escapes (quotes, backslashes, control characters) or that is not ASCII.
_ESCAPED = st.text(st.sampled_from(['"', "\\", "\t", "\x01", "é", "🙂", "a", "}"]), max_size=8)

# A property over the database: fewer examples, each on the test's own log.
_DATABASE_PROPERTY = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_DATABASE_PROPERTY
@given(
    shares=st.lists(
        st.tuples(
            st.one_of(st.integers(1, 20), st.integers(250, 300)),  # rows, batch rows, both
            # A plain group, one that records tools, or the full statement.
            st.sampled_from(["A", "TOOL_CALL_START", "RUN_FINISHED"]),
        ),
        min_size=1,
        max_size=5,
    ),
    text=_ESCAPED,
)
async def test_group_statement_when_runs_mix_batch_rows_and_rows_then_each_reads_as_sent(
    event_log: EventLog, shares: list[tuple[int, str]], text: str
) -> None:
    """One statement for several runs, some stored a row per event and some in batch rows
    (their chunks sent apart from the rows' JSON): every run reads back exactly its
    chunks, in order, from seq 1."""
    loop = asyncio.get_running_loop()
    appends: dict[str, list[Pending]] = {}
    for index, (count, last) in enumerate(shares):
        run = f"mix-{uuid.uuid4().hex[:8]}-{index}"
        kinds = ["A"] * (count - 1) + [last]
        chunks = [
            stored({"type": kind, "i": i, "t": text, "toolCallName": f"t{text}"}, i)
            for i, kind in enumerate(kinds)
        ]
        appends[run] = [Pending(run, chunks, None, False, True, None, loop.create_future())]
    group = Group.of(appends)
    statement, params = group.statement()
    async with event_log.pool.acquire() as conn:
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in appends])
        answer = await conn.fetch(statement, *params)
    assert sorted(row["run_id"] for row in answer) == sorted(appends)
    for run, (item,) in appends.items():
        events = await event_log.read_events(run, 0, 100_000)
        assert [(e.seq, e.type, e.chunk) for e in events] == [
            (i + 1, c.type, c.text) for i, c in enumerate(item.chunks)
        ]
    # The plain shares only bump their runs, the others record their terminal chunk or
    # the tool they called.
    async with event_log.pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT run_id, last_seq, last_terminal, tool_names FROM runs WHERE run_id = ANY($1)",
            list(appends),
        )
    assert {r["run_id"]: tuple(r[1:]) for r in rows} == {
        run: (
            len(item.chunks),
            "RUN_FINISHED" if item.chunks[-1].type == "RUN_FINISHED" else None,
            [f"t{text}"] if item.chunks[-1].type == "TOOL_CALL_START" else [],
        )
        for run, (item,) in appends.items()
    }


# A run's appends in one group: each (chunk types, tool names); the first append's
# expected seq (none, the next, or one past it); whether the last closes, and with
# which status.
_KINDS = st.lists(
    st.tuples(
        st.lists(
            st.sampled_from(["A", "TOOL_CALL_START", "RUN_FINISHED", "RUN_ERROR"]), max_size=3
        ),
        st.sampled_from(["search", "fetch"]),
    ),
    min_size=1,
    max_size=3,
)


@_DATABASE_PROPERTY
@given(
    runs=st.lists(
        st.tuples(
            _KINDS,
            st.sampled_from([None, 3, 4]),
            st.booleans(),
            st.sampled_from([None, "cancelled"]),
        ),
        min_size=1,
        max_size=5,
    )
)
# A share that records only the tools called, beside a plain one not at its expected
# seq; a run's error and close beside a plain share at its expected seq, with several
# chunks and with one each; a cancel.
@example(runs=[([(["RUN_ERROR"], "x")], None, True, None), ([(["A"], "x")], 3, False, None)])
@example(
    runs=[([(["TOOL_CALL_START"], "search")], None, False, None), ([(["A"], "x")], 4, False, None)]
)
@example(
    runs=[
        ([(["A"], "x"), (["RUN_ERROR"], "x")], 3, True, None),
        ([(["A", "A"], "x")], 3, False, None),
    ]
)
@example(runs=[([(["RUN_FINISHED", "TOOL_CALL_START"], "fetch")], None, True, "cancelled")])
async def test_group_when_shares_record_anything_then_each_run_changes_as_its_appends_say(
    event_log: EventLog,
    runs: list[tuple[list[tuple[list[str], str]], int | None, bool, str | None]],
) -> None:
    """A group of several runs' shares, some plain (a count, an expected seq) and some
    with more to record (tools called, a terminal chunk, its error and usage, a close
    and its status), committed by the statement the writer sends: every run at its
    expected seq (or with none) gets its events from seq 3 on and its summary as its
    chunks say; a run not at its expected seq is left exactly as it was."""
    loop = asyncio.get_running_loop()
    appends: dict[str, list[Pending]] = {}
    for index, (specs, expected, close, status) in enumerate(runs):
        run = f"share-{uuid.uuid4().hex[:8]}-{index}"
        await event_log.append(run, [{"type": "A"}, {"type": "A"}])
        items = []
        for position, (kinds, name) in enumerate(specs):
            values = [
                {"type": kind, "toolCallName": name, "message": "boom",
                 "usage": {"totalTokens": 5}}
                for kind in kinds
            ]  # fmt: skip
            last = position == len(specs) - 1
            items.append(
                Pending(
                    run, [stored(v, i) for i, v in enumerate(values)],
                    expected if position == 0 else None, close and last, False,
                    status if close and last else None, loop.create_future(),
                )
            )  # fmt: skip
        appends[run] = items
    statement, params = Group.of(appends).statement()
    async with event_log.pool.acquire() as conn:
        answer = await conn.fetch(statement, *params)
        found = {
            r["run_id"]: tuple(r)[1:]
            for r in await conn.fetch(
                "SELECT run_id, last_seq, closed_at IS NOT NULL, status, last_terminal,"
                " error_message, tool_names, total_tokens FROM runs WHERE run_id = ANY($1)",
                list(appends),
            )
        }
    want = {}
    applied = set()
    for run, (specs, expected, close, status) in zip(appends, runs, strict=True):
        kinds = [kind for kinds, _ in specs for kind in kinds]
        if expected not in (None, 3):
            want[run] = (2, False, "running", None, None, [], None)
            continue
        applied.add(run)
        ends = [kind for kind in kinds if kind in ("RUN_FINISHED", "RUN_ERROR")]
        terminal = ends[-1] if ends else None
        tools = sorted({name for kinds, name in specs if "TOOL_CALL_START" in kinds})
        tokens = 5 * kinds.count("RUN_FINISHED") or None
        state = "running"
        if close:
            state = status or ("error" if terminal == "RUN_ERROR" else "finished")
        error = "boom" if terminal == "RUN_ERROR" else None
        want[run] = (2 + len(kinds), close, state, terminal, error, tools, tokens)
    assert found == want
    assert {row["run_id"]: row["base"] for row in answer} == dict.fromkeys(applied, 2)
    for run in applied:
        events = await event_log.read_events(run, 2, 100)
        sent = [chunk.text for item in appends[run] for chunk in item.chunks]
        assert [(e.seq, e.chunk) for e in events] == list(enumerate(sent, start=3))


# Any string, control characters and the empty one included.
_ANY_TEXT = st.text(st.sampled_from(["\x1e", "\x1f", '"', "\\", "\x01", "é", "a", " "]), max_size=4)


@_DATABASE_PROPERTY
@given(
    shares=st.lists(
        st.tuples(
            st.sampled_from(["TEXT_MESSAGE_CONTENT", "TOOL_CALL_START"]),
            _ANY_TEXT,  # the message id (or tool-call id), and the text or tool name
            st.sampled_from([None, 3, 2, 4]),  # the expected seq (3 fits)
            st.booleans(),  # closed
            st.booleans(),  # ids null
        ),
        min_size=1,
        max_size=6,
    ),
    odd_type=st.one_of(st.none(), _ANY_TEXT),
)
async def test_one_event_per_run_group_when_some_runs_refuse_then_the_rest_read_back_as_sent(
    event_log: EventLog,
    shares: list[tuple[str, str, int | None, bool, bool]],
    odd_type: str | None,
) -> None:
    """A group of one event per run (a busy log's commonest group): every run that is
    open and at its expected seq (if one is given) gets its event at the next seq,
    exactly as sent (ids null or not, any type, the empty string included), and the
    tools it called; a closed run, or one not at the expected seq, gets nothing."""
    loop = asyncio.get_running_loop()
    appends: dict[str, list[Pending]] = {}
    for index, (kind, text, expected, closed, null_ids) in enumerate(shares):
        run = f"single-{uuid.uuid4().hex[:8]}-{index}"
        await event_log.append(run, [{"type": "A", "i": 1}, {"type": "A", "i": 2}])
        if closed:
            await event_log.close_run(run)
        if index == 0 and odd_type is not None:
            kind = odd_type  # any type at all, even one no AG-UI event has
        value: dict[str, object] = {"type": kind, "delta": text, "toolCallName": f"t{text}"}
        if not null_ids:
            value |= {"messageId": text, "toolCallId": f"c{text}"}
        chunk = stored(value, 0) if kind else stored_values([value], untyped=True)[0]
        appends[run] = [Pending(run, [chunk], expected, False, False, None, loop.create_future())]
    statement, params = Group.of(appends).statement()
    async with event_log.pool.acquire() as conn:
        answer = await conn.fetch(statement, *params)
    applied = {
        run
        for run, (_, _, expected, closed, _) in zip(appends, shares, strict=True)
        if not closed and expected in (None, 3)
    }
    assert {row["run_id"]: row["base"] for row in answer} == dict.fromkeys(applied, 2)
    async with event_log.pool.acquire() as conn:
        for index, (run, (item,)) in enumerate(appends.items()):
            rows = await conn.fetch(
                "SELECT seq, type, chunk, message_id, tool_call_id, n FROM events"
                " WHERE run_id = $1 AND seq > 2",
                run,
            )
            chunk = item.chunks[0]
            stored_as = [(3, chunk.type, chunk.text, chunk.message_id, chunk.tool_call_id, 1)]
            assert [tuple(row) for row in rows] == (stored_as if run in applied else [])
            state = await conn.fetchrow(
                "SELECT last_seq, tool_names FROM runs WHERE run_id = $1", run
            )
            tools = [f"t{shares[index][1]}"] if chunk.type == "TOOL_CALL_START" else []
            assert tuple(state) == ((3, tools) if run in applied else (2, []))
            assert [e.seq for e in await event_log.read_events(run, 0, 10)] == (
                [1, 2, 3] if run in applied else [1, 2]
            )


def _plan_group(shape: str, runs: list[str]) -> tuple[str, tuple[Any, ...]]:
    """The statement and parameters the writer sends for a group over `runs`: one token
    of each (the first a tool call's start), two chunks of each, or one chunk of each
    where the first ends its run and closes it."""
    loop = asyncio.get_running_loop()
    appends = {}
    for index, run in enumerate(runs):
        kind = "A"
        if index == 0:
            kind = "RUN_FINISHED" if shape == "one closes" else "TOOL_CALL_START"
        count = 2 if shape == "two chunks each" else 1
        chunks = [stored({"type": kind, "toolCallName": "search"}, i) for i in range(count)]
        close = shape == "one closes" and index == 0
        appends[run] = [Pending(run, chunks, None, close, False, None, loop.create_future())]
    return Group.of(appends).statement("plan-process")


@pytest.mark.parametrize("stats", ["none", "analyzed", "most_closed"])
@pytest.mark.parametrize("shape", ["tokens", "two chunks each", "one closes"])
async def test_append_statements_on_a_lane_connection_then_runs_are_read_by_key_only(
    event_log: EventLog, shape: str, stats: str
) -> None:
    """The plan a commit lane runs a group's statement on (its connection's settings, its
    generic plan), whatever the group holds: `runs` read by its key, right under its
    UPDATE (or a subplan's lookup of one run), never scanned whole nor through the
    (month, closed_at) index, whatever the table's statistics say: none yet (before
    autovacuum's first ANALYZE), all runs open, or most closed while many are open
    (stale after a burst of new runs). Either scan once read every run, or every open
    one, testing each against the group's ids. A group's rows meet their runs' updated
    rows by hashing one set, never by a nested loop (which rescans one set per row of
    the other)."""
    assert event_log.commit_pool is not None
    name = shape.replace(" ", "-")
    runs = [f"plan-{name}-{stats}-{i}" for i in range(300)]
    async with event_log.pool.acquire() as conn:
        await conn.executemany("INSERT INTO runs (run_id) VALUES ($1)", [(r,) for r in runs])
        if stats == "most_closed":
            closed = [f"plan-{name}-closed-{i}" for i in range(3000)]
            await conn.executemany(
                "INSERT INTO runs (run_id, closed_at) VALUES ($1, now())", [(r,) for r in closed]
            )
        if stats != "none":
            await conn.execute("ANALYZE runs")
    statement, args = _plan_group(shape, runs[:50])
    async with event_log.commit_pool.acquire() as conn:
        # PREPARE and EXPLAIN EXECUTE: the plan a prepared statement runs on (a
        # prepared EXPLAIN would plan with its values as constants).
        types = ", ".join("text[]" if isinstance(a, list) or a is None else "text" for a in args)
        await conn.execute(f"PREPARE planned ({types}) AS {statement}")
        literals = [
            await conn.fetchval("SELECT quote_nullable($1::text[]::text)", a)
            if isinstance(a, list) or a is None
            else await conn.fetchval("SELECT quote_literal($1::text)", a)
            for a in args
        ]
        explain = f"EXPLAIN EXECUTE planned ({', '.join(literals)})"
        raw = [row[0] for row in await conn.fetch(explain)]
        await conn.execute("DEALLOCATE planned")
    lines = [line.strip() for line in raw]
    plan = "\n".join(lines)
    scans = [i for i, line in enumerate(lines) if " on runs " in line and "Update" not in line]
    assert scans, plan
    for i in scans:
        assert lines[i].startswith("->  Index Scan using runs_pkey on runs"), plan
        # Right under its UPDATE or the lock the chain's head is read under (or a
        # subplan's lookup of one run by its key): its parent is the nearest line
        # above indented less (an InitPlan of the UPDATE's sits between them).
        depth = len(raw[i]) - len(raw[i].lstrip())
        parent = next(
            lines[j] for j in range(i - 1, -1, -1) if len(raw[j]) - len(raw[j].lstrip()) < depth
        )
        assert parent.startswith(("->  Update on runs", "->  LockRows", "SubPlan")), plan
    for node in ("Seq Scan", "Bitmap", "runs_month_closed_idx", "Nested Loop", "Merge Join"):
        assert node not in plan, plan


async def _stalled_on_lock(other: asyncpg.Connection, run_id: str) -> None:
    """Until a group's statement waits for `run_id`'s row, which `other` holds."""
    waiting = (
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query ~ '^WITH (locked|upd|rich) AS'"
    )
    async with asyncio.timeout(10):
        while not await other.fetchval(waiting):  # noqa: ASYNC110 (server state, no event)
            await asyncio.sleep(0.01)


async def test_appends_when_a_group_waits_on_a_run_lock_then_other_runs_commit_beside_it(
    event_log: EventLog, database_url: str
) -> None:
    """Held behind a group in flight only for the overlap: a statement stalled on a run
    row another transaction holds (a guarded append, an import) holds no other run."""
    log = event_log
    await log.append("stall-a", [{"type": "A"}])
    await log.append("stall-b", [{"type": "A"}])
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'stall-a' FOR UPDATE")
        stalled = asyncio.create_task(log.append("stall-a", [{"type": "B"}]))
        await _stalled_on_lock(other, "stall-a")
        async with asyncio.timeout(10):
            beside = await log.append("stall-b", [{"type": "B"}])
        assert beside.last_seq == 2 and not stalled.done()
        await tx.commit()
        assert (await stalled).last_seq == 2
    finally:
        await other.close()


async def _held(log: EventLog, events: int) -> None:
    """Until the group committer holds `events` queued events back (for the group in flight
    or the pace) and no lane is on its way to look again: a lane has looked at all of them
    and chose to wait, and none looks before the hold's timer ends or another append comes.
    Nothing public says so; the committer's own state does."""
    committer = log._committer
    async with asyncio.timeout(10):
        while not (  # noqa: ASYNC110 (no event is set for a hold)
            committer._hold is not None and not committer._calling and committer._queued == events
        ):
            await asyncio.sleep(0.01)


def _groups_committed() -> float:
    """How many groups this process has committed (the group-size histogram's count)."""
    from agent_replay import metrics

    return metrics.GROUP_COMMIT_EVENTS.count


async def test_appends_when_they_trickle_in_behind_a_group_in_flight_then_one_next_group(
    database_url: str,
) -> None:
    """With an overlap longer than the group in flight, what arrives meanwhile (any runs)
    waits for it and commits as one group, not a group per lane."""
    log = await EventLog.open(database_url, commit_overlap_seconds=30.0)
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        runs = [f"trickle-{i}" for i in range(6)]
        for run in ["trickle-lock", *runs]:
            await log.append(run, [{"type": "A"}])
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'trickle-lock' FOR UPDATE")
        stalled = asyncio.create_task(log.append("trickle-lock", [{"type": "B"}]))
        await _stalled_on_lock(other, "trickle-lock")
        before = _groups_committed()
        trickle = [asyncio.create_task(log.append(run, [{"type": "B"}])) for run in runs]
        # A lane has looked at them and holds them: none commits beside the stalled group.
        await _held(log, len(runs))
        assert not any(task.done() for task in trickle)
        await tx.commit()
        async with asyncio.timeout(10):
            results = await asyncio.gather(stalled, *trickle)
        assert [r.last_seq for r in results] == [2] * 7
        assert _groups_committed() - before == 2  # the stalled group, then all six at once
    finally:
        await other.close()
        await log.close()


async def test_appends_when_a_group_of_several_runs_just_began_then_the_next_waits_the_pace(
    database_url: str,
) -> None:
    """After a group holding several runs, the next group starts no sooner than the
    pace after it: appends arriving one by one meanwhile go together."""
    log = await EventLog.open(database_url, commit_pace_seconds=1.0)
    try:
        await asyncio.gather(*(log.append(f"pace-{i}", [{"type": "A"}]) for i in range(2)))
        before = _groups_committed()
        first = asyncio.create_task(log.append("pace-2", [{"type": "A"}]))
        # A lane has looked at it and holds it for the pace: it does not commit alone.
        await _held(log, 1)
        assert not first.done()
        rest = [asyncio.create_task(log.append(f"pace-{i}", [{"type": "A"}])) for i in (3, 4)]
        async with asyncio.timeout(10):
            results = await asyncio.gather(first, *rest)
        assert [r.last_seq for r in results] == [1, 1, 1]
        assert _groups_committed() - before == 1
    finally:
        await log.close()


async def test_appends_when_every_run_of_a_paced_group_appends_again_then_no_pace(
    database_url: str,
) -> None:
    """Producers that wait on each append (a closed loop) are all queued again once
    their group commits: waiting the pace then gathers nobody more, so the next group
    goes at once; while one of them has not come back, the pace holds."""
    log = await EventLog.open(database_url, commit_pace_seconds=5.0)
    try:
        await asyncio.gather(*(log.append(f"closed-loop-{i}", [{"type": "A"}]) for i in range(3)))
        async with asyncio.timeout(4):
            for seq in (2, 3):
                results = await asyncio.gather(
                    *(log.append(f"closed-loop-{i}", [{"type": "A"}]) for i in range(3))
                )
                assert [r.last_seq for r in results] == [seq] * 3
        before = _groups_committed()
        two = [asyncio.create_task(log.append(f"closed-loop-{i}", [{"type": "A"}])) for i in (0, 1)]
        # A lane has looked at these two and holds them for the pace, closed-loop-2 not
        # having come back.
        await _held(log, len(two))
        assert not any(task.done() for task in two)
        async with asyncio.timeout(4):
            results = await asyncio.gather(*two, log.append("closed-loop-2", [{"type": "A"}]))
        assert [r.last_seq for r in results] == [4] * 3
        assert _groups_committed() - before == 1
    finally:
        await log.close()


async def test_appends_when_one_producer_on_one_run_then_never_paced(
    database_url: str,
) -> None:
    """A lone producer's groups hold one run: its appends, one after another, wait for
    no pace (three paced ones would take at least 10 s)."""
    log = await EventLog.open(database_url, commit_pace_seconds=5.0)
    try:
        async with asyncio.timeout(4):
            for seq in range(1, 4):
                assert (await log.append("pace-alone", [{"type": "A"}])).last_seq == seq
    finally:
        await log.close()


async def test_append_when_retry_found_stored_then_row_hooks_hear_the_runs_state(
    event_log: EventLog,
) -> None:
    """A retry's first try committed, perhaps unheard (its answer lost): the row hooks
    get the run's state as a hint (no rows), so a follower here looks at the log."""
    told: list[tuple[list[tuple[int, str]] | None, int]] = []
    remove = event_log.on_commit_rows(
        lambda run, rows, last, closed: told.append((rows, last)) if run == "heard-1" else None
    )
    try:
        batch = [{"type": "A"}, {"type": "B"}]
        await event_log.append("heard-1", batch, expected_seq=1)
        again = await event_log.append("heard-1", batch, expected_seq=1)
    finally:
        remove()
    assert (again.first_seq, again.last_seq) == (1, 2)
    assert [last for _, last in told] == [2, 2]
    assert told[0][0] is not None and told[1][0] is None


async def test_append_when_its_group_fails_then_each_listener_is_told_to_recheck(
    database_url: str,
) -> None:
    """The listener drops this pool's own notifications, so a group whose answer never
    came (it may have committed) must make the listener's owner re-check, as after a
    reconnect. Here the statement times out behind a run row another transaction holds."""
    log = await EventLog.open(database_url, statement_seconds=0.5, answer_seconds=10)
    rechecks: list[int] = []
    listener = await log.listen(lambda notices: None, lambda: rechecks.append(1))
    other = await asyncpg.connect(asyncpg_dsn(database_url))
    try:
        await log.append("unsure-1", [{"type": "A"}])
        connects = len(rechecks)
        tx = other.transaction()
        await tx.start()
        await other.execute("SELECT 1 FROM runs WHERE run_id = 'unsure-1' FOR UPDATE")
        with pytest.raises(Unavailable):
            await log.append("unsure-1", [{"type": "B"}])
        assert len(rechecks) == connects + 1
        await tx.rollback()
    finally:
        await other.close()
        await listener.stop()
        await log.close()


_SUMMARY_FIELDS = (
    "thread_id",
    "status",
    "last_seq",
    "last_terminal",
    "error_message",
    "error_code",
    "tool_names",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
)
_event_ids = st.none() | st.sampled_from(["m1", "c-\u00e9", "nul\x00", 7])
_large_events = st.lists(
    st.builds(
        lambda kind, message_id, tool_call_id, n: {
            "type": kind,
            "n": n,
            **({} if message_id is None else {"messageId": message_id}),
            **({} if tool_call_id is None else {"toolCallId": tool_call_id}),
            **({"threadId": f"th-{n}"} if kind == "RUN_STARTED" else {}),
            **({"toolCallName": f"tool-{n % 3}"} if kind == "TOOL_CALL_START" else {}),
            **({"usage": {"totalTokens": n}} if kind == "RUN_FINISHED" else {}),
            **({"message": f"boom {n}", "code": "E"} if kind == "RUN_ERROR" else {}),
        },
        st.sampled_from(
            ["TEXT_MESSAGE_CONTENT"] * 6
            + ["RUN_STARTED", "TOOL_CALL_START", "RUN_FINISHED"]
            + ["RUN_ERROR"]
        ),
        _event_ids,
        _event_ids,
        st.integers(0, 10**6),
    ),
    min_size=16,
    max_size=300,
)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(parts=st.lists(_large_events, min_size=1, max_size=3), newline=st.booleans())
async def test_append_when_large_bodies_kept_as_columns_then_stored_as_their_events_would_be(
    event_log: EventLog, parts: list[list[dict[str, object]]], newline: bool
) -> None:
    """A large JSON body's chunks stay columns (`Chunks`: types read, texts decoded only
    when needed, ids never). Appended at once to one new run (one group, one share),
    they make the same run as the same events parsed one by one: the thread it is
    created with, every event and id column, and the summary; also when a type with
    a newline has them stored a row per event, ids and all."""
    if newline:
        parts[0][len(parts[0]) // 2] = {"type": "A\nB", "messageId": "m\u00e9", "toolCallId": 3}
    tag = uuid.uuid4().hex[:8]
    columns, parsed = f"columns-{tag}", f"parsed-{tag}"
    bodies = [split_events(orjson.dumps({"events": part})) for part in parts]
    assert all(body is not None and type(body[0]) is Chunks for body in bodies)
    await asyncio.gather(*(event_log.append(columns, body[0]) for body in bodies if body))
    await asyncio.gather(*(event_log.append(parsed, part) for part in parts))
    stored_ids = (
        "SELECT seq, n, type, message_id, tool_call_id FROM events WHERE run_id = $1 ORDER BY seq"
    )
    runs = [await event_log.get_run(run) for run in (columns, parsed)]
    assert [[getattr(run, name) for name in _SUMMARY_FIELDS] for run in runs] == [
        [getattr(runs[1], name) for name in _SUMMARY_FIELDS]
    ] * 2
    reads = [await event_log.read_events(run, 0, 100_000) for run in (columns, parsed)]
    assert [[(e.seq, e.type, json.loads(e.chunk)) for e in read] for read in reads] == [
        [(i + 1, str(event["type"]), event) for i, event in enumerate(chain.from_iterable(parts))]
    ] * 2
    rows = [
        list(map(tuple, await event_log.pool.fetch(stored_ids, run))) for run in (columns, parsed)
    ]
    assert rows[0] == rows[1]
