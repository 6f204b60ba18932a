"""The hash chain in the log: computed by the append statements, checked by `verify_run`
against alterations made with plain SQL, and backfilled for runs stored before it."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay import migrate
from agent_replay.chain import GENESIS, fold, step
from agent_replay.config import asyncpg_dsn
from agent_replay.log import EventLog
from agent_replay.log.chunks import stored
from agent_replay.log.integrity import (
    HASH_MISMATCH,
    HEAD_MISMATCH,
    MISSING_EVENT,
    PAST_HEAD,
    PAST_LAST_SEQ,
    TRUNCATED,
    UNCHAINED,
)
from agent_replay.log.streams import NewStream, StreamStore
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord
from tests.log.test_eventlog_contract import LAYOUTS
from tests.support.pg import Databases

_PROPERTY = settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture(params=LAYOUTS)
async def log(database_url: str, request: pytest.FixtureRequest) -> AsyncIterator[EventLog]:
    async with EventLog.connect(database_url, pool_size=4, batch_min=request.param) as opened:
        yield opened


def _run(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _chunks(start: int, count: int) -> list[dict[str, Any]]:
    return [{"type": "M", "n": n} for n in range(start, start + count)]


async def _events(log: EventLog, run_id: str) -> list[tuple[int, str, bytes | None]]:
    """Each stored event's (seq, chunk, hash), cut from its row with plain SQL."""
    rows = await log.pool.fetch(
        "SELECT seq, n, chunk, hashes FROM events WHERE run_id = $1 ORDER BY seq", run_id
    )
    out: list[tuple[int, str, bytes | None]] = []
    for row in rows:
        texts = row["chunk"].split("\n") if row["n"] > 1 else [row["chunk"]]
        hashes = row["hashes"]
        for i, text in enumerate(texts):
            at = None if hashes is None else bytes(hashes[32 * i : 32 * i + 32])
            out.append((row["seq"] - row["n"] + 1 + i, text, at))
    return out


async def _head(log: EventLog, run_id: str) -> bytes | None:
    head = await log.pool.fetchval("SELECT chain_head FROM runs WHERE run_id = $1", run_id)
    return None if head is None else bytes(head)


async def _assert_chained_as_defined(log: EventLog, run_id: str, count: int) -> None:
    events = await _events(log, run_id)
    assert [seq for seq, _, _ in events] == list(range(1, count + 1))
    head = GENESIS
    for seq, text, stored_hash in events:
        head = step(head, seq, text)
        assert stored_hash == head, seq
    assert await _head(log, run_id) == head


async def test_append_when_one_chunk_then_many_then_a_large_batch_then_each_hash_is_the_chains(
    log: EventLog,
) -> None:
    run_id = _run("ch-sizes")
    total = 0
    for size in (1, 3, 1, 600, 2):
        await log.append(run_id, _chunks(total, size))
        total += size
    await _assert_chained_as_defined(log, run_id, total)


async def test_close_when_bare_or_with_chunks_then_the_chain_goes_on_from_its_head(
    log: EventLog,
) -> None:
    """A close without chunks has no rows to chain: the run keeps its head."""
    bare, with_chunks = _run("ch-close"), _run("ch-close-c")
    await log.append(bare, _chunks(0, 3))
    await log.close_run(bare)
    await log.append(with_chunks, _chunks(0, 2))
    await log.append(with_chunks, [{"type": "RUN_FINISHED"}], close=True)
    await _assert_chained_as_defined(log, bare, 3)
    await _assert_chained_as_defined(log, with_chunks, 3)
    for run_id in (bare, with_chunks):
        verdict = await log.verify_run(run_id)
        assert verdict is not None and verdict.ok, verdict


async def test_group_of_one_token_per_run_then_each_run_chained_from_its_own_head(
    log: EventLog,
) -> None:
    """`append_ones`' groups: many runs, a chunk each, in one statement."""
    runs = [_run("ch-ones") for _ in range(30)]
    for round_ in range(4):
        await asyncio.gather(
            *(log.submit_append(r, [stored({"type": "T", "r": round_}, 0)], expected_seq=round_ + 1,
                                create=True) for r in runs)
        )  # fmt: skip
    for run_id in runs:
        await _assert_chained_as_defined(log, run_id, 4)


async def test_appends_from_two_processes_to_one_run_when_concurrent_then_one_chain(
    database_url: str, log: EventLog
) -> None:
    """Two logs (two processes' pools and lanes) appending to one run at once: each
    statement chains from the head the other's commit left."""
    run_id = _run("ch-race")
    async with EventLog.connect(database_url, pool_size=4, batch_min=log.batch_min) as other:
        await asyncio.gather(
            *(
                (log if i % 2 else other).append(run_id, _chunks(i * 10, 1 + i % 5))
                for i in range(40)
            )
        )
    total = sum(1 + i % 5 for i in range(40))
    await _assert_chained_as_defined(log, run_id, total)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.ok, verdict.events) == (True, total)


async def test_fork_when_made_and_appended_then_its_chain_is_the_chain_of_what_it_reads(
    log: EventLog,
) -> None:
    streams = StreamStore(log)
    source, fork = _run("ch-src"), _run("ch-fork")
    await streams.create(NewStream(source, "application/json", None, None, False),
                         [stored({"type": "M", "n": n}, n) for n in range(6)])  # fmt: skip
    await streams.create(
        NewStream(fork, "application/json", None, None, False, fork_spec=f'["{source}",4]',
                  fork_source_run=source, fork_seq=4),
        [stored({"type": "M", "n": 40}, 0)],
    )  # fmt: skip
    await log.append(fork, _chunks(41, 3))
    events = [(e.seq, e.chunk) for e in await log.read_events(fork, 0, 100)]
    assert len(events) == 8
    assert await _head(log, fork) == fold(events)
    # Forks of the fork: inside its inherited prefix (the source's hash there), and in
    # its own events.
    inner, outer = _run("ch-fork-in"), _run("ch-fork-out")
    for child, at in ((inner, 2), (outer, 6)):
        await streams.create(
            NewStream(child, "application/json", None, None, False, fork_spec=f'["{fork}",{at}]',
                      fork_source_run=fork, fork_seq=at),
            [],
        )  # fmt: skip
        await log.append(child, _chunks(70 + at, 2))
        read = [(e.seq, e.chunk) for e in await log.read_events(child, 0, 100)]
        assert len(read) == at + 2
        assert await _head(log, child) == fold(read)
    for run_id in (source, fork, inner, outer):
        verdict = await log.verify_run(run_id)
        assert verdict is not None and verdict.ok, verdict


async def test_import_when_runs_loaded_then_each_chained_as_an_append_would(
    log: EventLog,
) -> None:
    run_id = _run("ch-import")
    record = await _record(log, run_id)
    texts = [json.dumps({"type": "M", "n": n}, separators=(",", ":")) for n in range(5)]
    events = [LoggedEvent(stored(json.loads(t), i), record.created_at) for i, t in enumerate(texts)]
    await log.load_runs([LoadedRun(record, events)])
    await _assert_chained_as_defined(log, run_id, 5)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and verdict.ok


async def _record(log: EventLog, run_id: str) -> RunRecord:
    now = await log.pool.fetchval("SELECT date_trunc('second', now())")
    return RunRecord(run_id=run_id, thread_id="th-import", agent=None, status="finished",
                     created_at=now, updated_at=now, closed_at=now, last_seq=5,
                     error_message=None, metadata={}, input=None)  # fmt: skip


# -- verify: each alteration, done with plain SQL ---------------------------------------


async def _stored_run(log: EventLog, sizes: list[int]) -> str:
    run_id = _run("ch-v")
    total = 0
    for size in sizes:
        await log.append(run_id, _chunks(total, size))
        total += size
    return run_id


async def _rows(log: EventLog, run_id: str) -> list[tuple[int, int]]:
    """(first seq, last seq) of each of the run's rows."""
    rows = await log.pool.fetch("SELECT seq, n FROM events WHERE run_id = $1 ORDER BY seq", run_id)
    return [(r["seq"] - r["n"] + 1, r["seq"]) for r in rows]


async def _edit(log: EventLog, run_id: str, seq: int) -> None:
    """One event's chunk changed (one space added), inside its row whatever the layout."""
    await log.pool.execute(
        """
        UPDATE events SET chunk = array_to_string(ARRAY(
            SELECT CASE WHEN seq - n + o = $2 THEN x || ' ' ELSE x END
            FROM unnest(string_to_array(chunk, E'\\n')) WITH ORDINALITY AS u(x, o)
            ORDER BY o), E'\\n')
        WHERE run_id = $1 AND seq >= $2 AND seq - n < $2
        """,
        run_id,
        seq,
    )


async def _delete_row(log: EventLog, run_id: str, seq: int) -> None:
    await log.pool.execute(
        "DELETE FROM events WHERE run_id = $1 AND seq >= $2 AND seq - n < $2", run_id, seq
    )


async def _swap(log: EventLog, run_id: str, a: int, b: int) -> None:
    """Rows ending at `a` and `b` (of one size) trade places: chunks, types and hashes."""
    await log.pool.execute(
        """
        UPDATE events e SET chunk = o.chunk, type = o.type, hashes = o.hashes
        FROM events o
        WHERE e.run_id = $1 AND o.run_id = $1
          AND ((e.seq = $2 AND o.seq = $3) OR (e.seq = $3 AND o.seq = $2))
        """,
        run_id,
        a,
        b,
    )


async def _append_behind(log: EventLog, run_id: str, count: int) -> None:
    """A row inserted past the run's last_seq, its hash chained as the service would."""
    events = await _events(log, run_id)
    head = events[-1][2] if events else GENESIS
    assert head is not None
    seq = count + 1
    text = '{"type":"FORGED"}'
    await log.pool.execute(
        "INSERT INTO events (run_id, seq, type, chunk, n, run_month, hashes) "
        "SELECT $1, $2, 'FORGED', $3, 1, run_month, $4 FROM runs WHERE run_id = $1",
        run_id, seq, text, step(head, seq, text),
    )  # fmt: skip


async def test_verify_when_untouched_then_ok_with_the_head_and_every_event(log: EventLog) -> None:
    run_id = await _stored_run(log, [1, 5, 2])
    verdict = await log.verify_run(run_id)
    assert verdict is not None
    head = (await _head(log, run_id) or b"").hex()
    assert verdict.to_json() == {"ok": True, "events": 8, "head": head,
                                 "first_bad_seq": None, "reason": None}  # fmt: skip


async def test_verify_when_no_such_run_then_none(log: EventLog) -> None:
    assert await log.verify_run("ch-nobody") is None


async def test_verify_when_a_chunk_changed_then_that_seq_hash_mismatch(log: EventLog) -> None:
    run_id = await _stored_run(log, [3, 1])
    await _edit(log, run_id, 2)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.ok, verdict.first_bad_seq, verdict.reason) == (
        False, 2, HASH_MISMATCH)  # fmt: skip


async def test_verify_when_a_batch_rows_event_edited_inside_it_then_that_seq(
    database_url: str,
) -> None:
    async with EventLog.connect(database_url, pool_size=2, batch_min=2) as log:
        run_id = await _stored_run(log, [1, 300])
        assert (2, 257) in await _rows(log, run_id)  # a batch row
        await _edit(log, run_id, 100)
        verdict = await log.verify_run(run_id)
        assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (
            100, HASH_MISMATCH)  # fmt: skip


async def test_verify_when_a_row_deleted_then_its_first_seq_missing(log: EventLog) -> None:
    run_id = await _stored_run(log, [1, 1, 4, 1])
    rows = await _rows(log, run_id)
    await _delete_row(log, run_id, rows[2][0])
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (
        rows[2][0], MISSING_EVENT)  # fmt: skip


async def test_verify_when_two_rows_swapped_then_the_first_of_them_mismatches(
    log: EventLog,
) -> None:
    run_id = await _stored_run(log, [1, 1, 1, 1, 1])
    await _swap(log, run_id, 2, 4)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (2, HASH_MISMATCH)


async def test_verify_when_a_row_appended_behind_the_service_then_past_last_seq(
    log: EventLog,
) -> None:
    run_id = await _stored_run(log, [2, 3])
    await _append_behind(log, run_id, 5)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (6, PAST_LAST_SEQ)


async def test_verify_when_appended_and_last_seq_raised_but_head_kept_then_past_head(
    log: EventLog,
) -> None:
    run_id = await _stored_run(log, [2, 3])
    await _append_behind(log, run_id, 5)
    await log.pool.execute("UPDATE runs SET last_seq = 6 WHERE run_id = $1", run_id)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (6, PAST_HEAD)


async def test_verify_when_a_row_without_hash_appended_then_unchained(log: EventLog) -> None:
    run_id = await _stored_run(log, [2])
    await log.pool.execute(
        "INSERT INTO events (run_id, seq, type, chunk, n, run_month) "
        "SELECT $1, 3, 'X', '{}', 1, run_month FROM runs WHERE run_id = $1; ",
        run_id,
    )
    await log.pool.execute("UPDATE runs SET last_seq = 3 WHERE run_id = $1", run_id)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (3, UNCHAINED)


async def test_verify_when_the_tail_truncated_then_the_first_missing_seq(log: EventLog) -> None:
    run_id = await _stored_run(log, [3, 1, 1])
    await log.pool.execute("DELETE FROM events WHERE run_id = $1 AND seq > 3", run_id)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (4, TRUNCATED)
    # And with the run row's last_seq lowered to hide it: the head still tells.
    await log.pool.execute("UPDATE runs SET last_seq = 3 WHERE run_id = $1", run_id)
    verdict = await log.verify_run(run_id)
    assert verdict is not None and (verdict.first_bad_seq, verdict.reason) == (4, HEAD_MISMATCH)


# -- verify: random runs, random single alterations --------------------------------------

_ALTERATIONS = st.sampled_from(["edit", "delete", "swap", "append", "truncate", "none"])


@_PROPERTY
@given(
    sizes=st.lists(st.sampled_from([1, 1, 2, 3, 7, 300]), min_size=1, max_size=6),
    alteration=_ALTERATIONS,
    pick=st.integers(0, 10_000),
    other=st.integers(0, 10_000),
)
async def test_verify_when_one_random_alteration_then_names_the_first_altered_seq(
    log: EventLog, sizes: list[int], alteration: str, pick: int, other: int
) -> None:
    run_id = await _stored_run(log, sizes)
    total = sum(sizes)
    rows = await _rows(log, run_id)
    expected: int | None
    if alteration == "edit":
        expected = 1 + pick % total
        await _edit(log, run_id, expected)
    elif alteration == "delete":
        first, _ = rows[pick % len(rows)]
        expected = first
        await _delete_row(log, run_id, first)
    elif alteration == "swap":
        a, b = rows[pick % len(rows)], rows[other % len(rows)]
        same = [r for r in rows if r[1] - r[0] == a[1] - a[0] and r != a]
        if not same:
            expected = None
        else:
            b = same[other % len(same)]
            expected = min(a[0], b[0])
            await _swap(log, run_id, a[1], b[1])
    elif alteration == "append":
        expected = total + 1
        await _append_behind(log, run_id, total)
    elif alteration == "truncate":
        first, _ = rows[pick % len(rows)]
        expected = first
        await log.pool.execute("DELETE FROM events WHERE run_id = $1 AND seq >= $2", run_id, first)
    else:
        expected = None
    verdict = await log.verify_run(run_id)
    assert verdict is not None
    assert (verdict.ok, verdict.first_bad_seq) == (expected is None, expected), verdict


# -- the backfill of runs stored before the chain -----------------------------------------


async def test_backfill_when_interrupted_then_run_again_chains_every_run_once(
    databases: Databases,
) -> None:
    """Runs stored at revision 0010 (rows and batch rows, a fork, an empty run), one
    appended to after the migration but before its backfill: the backfill stopped after
    its first batch leaves the rest unchained (and unverified); run again, it finishes,
    and every run then verifies, its hashes as the append would have stored them."""
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url, "0010_stream_deletable")
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            for i in range(45):
                await conn.execute(
                    "INSERT INTO runs (run_id, last_seq) VALUES ($1, 5)", f"old-{i:02d}"
                )
                await conn.executemany(
                    "INSERT INTO events (run_id, seq, type, chunk, run_month) "
                    "SELECT $1, $2, 'M', $3, run_month FROM runs WHERE run_id = $1",
                    [(f"old-{i:02d}", s, f'{{"n":{s}}}') for s in range(1, 6)],
                )
            # A batch row (seqs 1-3) then a row, and a fork of it at seq 2.
            await conn.execute("INSERT INTO runs (run_id, last_seq) VALUES ('old-b', 4)")
            await conn.execute(
                "INSERT INTO events (run_id, seq, type, chunk, n, run_month) SELECT 'old-b', s, t, "
                "c, n, (SELECT run_month FROM runs WHERE run_id = 'old-b') FROM (VALUES "
                '(3, E\'M\\nM\\nM\', E\'{"n":1}\\n{"n":2}\\n{"n":3}\', 3), '
                "(4, 'M', '{\"n\":4}', 1)) AS v(s, t, c, n)"
            )
            await conn.execute("INSERT INTO runs (run_id, last_seq) VALUES ('old-f', 3)")
            await conn.execute(
                "INSERT INTO run_forks (run_id, source_run_id, fork_seq) "
                "VALUES ('old-f', 'old-b', 2)"
            )
            await conn.execute(
                "INSERT INTO events (run_id, seq, type, chunk, run_month) "
                "SELECT 'old-f', 3, 'M', '{\"f\":3}', run_month FROM runs WHERE run_id = 'old-f'"
            )
            await conn.execute("INSERT INTO runs (run_id) VALUES ('old-empty')")
        finally:
            await conn.close()
        await asyncio.to_thread(migrate.upgrade, url)
        async with EventLog.connect(url, pool_size=2) as log:
            # Appended before the backfill reached it: stored unchained, chained later.
            await log.append("old-b", _chunks(5, 2))
            assert (await _events(log, "old-b"))[-1][2] is None
            first = await migrate.chain_backfill(url, max_batches=1)
            assert (first.runs, first.left) == (20, 28)
            assert (
                await log.pool.fetchval("SELECT count(*) FROM runs WHERE chain_head IS NULL") == 28
            )
            unchained = await log.verify_run("old-f")
            assert unchained is not None and unchained.reason == UNCHAINED
            rest = await migrate.chain_backfill(url)
            assert (rest.runs, rest.left) == (28, 0)
            for run_id in [f"old-{i:02d}" for i in range(45)] + ["old-b", "old-f", "old-empty"]:
                verdict = await log.verify_run(run_id)
                assert verdict is not None and verdict.ok, verdict
            await _assert_chained_as_defined(log, "old-b", 6)
            fork = [(e.seq, e.chunk) for e in await log.read_events("old-f", 0, 10)]
            assert [s for s, _ in fork] == [1, 2, 3]
            assert await _head(log, "old-f") == fold(fork)
            # And appends after it chain on.
            await log.append("old-f", _chunks(9, 2))
            verdict = await log.verify_run("old-f")
            assert verdict is not None and (verdict.ok, verdict.events) == (True, 5)
            again = await migrate.chain_backfill(url)
            assert (again.runs, again.left) == (0, 0)
    finally:
        await databases.drop(url)


async def test_backfill_when_appends_race_it_on_unchained_runs_then_every_run_chains_whole(
    databases: Databases,
) -> None:
    """The backfill beside live appends to the very runs it chains (two writers' worth of
    appends, rows and batch rows): each append either commits before the backfill locks
    its run (chained with the rest) or after (chained from the head it set); none is
    chained from a head that was not its run's last."""
    url = await databases.empty()
    try:
        await asyncio.to_thread(migrate.upgrade, url, "0010_stream_deletable")
        runs = [f"live-{i:02d}" for i in range(24)]
        conn = await asyncpg.connect(asyncpg_dsn(url))
        try:
            for run_id in runs:
                await conn.execute("INSERT INTO runs (run_id, last_seq) VALUES ($1, 2)", run_id)
                await conn.executemany(
                    "INSERT INTO events (run_id, seq, type, chunk, run_month) "
                    "SELECT $1, $2, 'M', $3, run_month FROM runs WHERE run_id = $1",
                    [(run_id, s, f'{{"old":{s}}}') for s in (1, 2)],
                )
        finally:
            await conn.close()
        await asyncio.to_thread(migrate.upgrade, url)
        async with (
            EventLog.connect(url, pool_size=4) as one,
            EventLog.connect(url, pool_size=4, batch_min=2) as two,
        ):

            async def appends(log: EventLog, start: int) -> None:
                for round_ in range(6):
                    await asyncio.gather(
                        *(log.append(r, _chunks(start + round_, 1 + (i + round_) % 4))
                          for i, r in enumerate(runs))
                    )  # fmt: skip

            async def backfill() -> int:
                done = 0
                while True:
                    report = await migrate.chain_backfill(url, max_batches=1)
                    done += report.runs
                    if not report.left:
                        return done

            _, _, chained = await asyncio.gather(appends(one, 0), appends(two, 100), backfill())
            assert chained == len(runs)
            for run_id in runs:
                verdict = await one.verify_run(run_id)
                assert verdict is not None and verdict.ok, verdict
                stored = await one.get_run(run_id)
                assert verdict.events == stored.last_seq
                await _assert_chained_as_defined(one, run_id, stored.last_seq)
    finally:
        await databases.drop(url)
