"""`events` partitioned by its run's month: partitions made ahead, reads that touch one
partition, months dropped whole by prune (open runs and forks hold theirs), appends
unharmed by a prune."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest

from agent_replay.log import EventLog, partitions
from agent_replay.log.chunks import stored
from agent_replay.log.sql import QUERIES
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord
from tests.support.pg import Databases

OLD = date(2025, 3, 1)  # a month whose runs are all closed long ago
HELD = date(2025, 4, 1)  # one of its runs is still open
SOURCE = date(2025, 5, 1)  # a fork of this month reads a run of it


def _run(run_id: str, month: date, events: int, *, closed: bool = True) -> LoadedRun:
    created = datetime(month.year, month.month, 10, tzinfo=UTC)
    record = RunRecord(
        run_id=run_id, thread_id="t", agent=None, status="finished" if closed else "running",
        created_at=created, updated_at=created, closed_at=created if closed else None,
        last_seq=events, error_message=None, metadata={}, input=None,
    )  # fmt: skip
    chunks = [
        LoggedEvent(stored({"type": "E", "n": i}, i), created + timedelta(seconds=i))
        for i in range(events)
    ]
    return LoadedRun(record, chunks)


async def _names(conn: asyncpg.Connection) -> set[str]:
    return {p.name for p in await partitions.partitions(conn)}


async def test_log_when_opened_then_current_and_next_month_partitions_exist(
    database_url: str,
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("DROP TABLE IF EXISTS events_2030_01")
        log = await EventLog.open(database_url)
        await log.close()
        current = partitions.month_of(datetime.now(UTC))
        names = await _names(conn)
        assert {partitions.name_of(current), partitions.name_of(partitions.next_month(current))}
        assert partitions.name_of(current) in names
        assert partitions.name_of(partitions.next_month(current)) in names
        # No default partition: DETACH ... CONCURRENTLY is refused with one.
        default = await conn.fetchval(
            "SELECT count(*) FROM pg_partitioned_table WHERE partdefid <> 0"
        )
        assert default == 0
    finally:
        await conn.close()


async def test_ensure_when_many_processes_at_once_then_each_month_made_once(
    database_url: str,
) -> None:
    pools = [await asyncpg.create_pool(database_url, min_size=1, max_size=2) for _ in range(4)]
    months = [date(2030, 1, 1), date(2030, 2, 1)]
    try:
        made = await asyncio.gather(*(partitions.ensure(pool, months) for pool in pools))
        assert sorted(m for got in made for m in got) == months
        assert {"events_2030_01", "events_2030_02"} <= await _names(pools[0])  # type: ignore[arg-type]
        assert await asyncio.gather(*(partitions.ensure(p, months) for p in pools)) == [[]] * 4
    finally:
        for pool in pools:
            await pool.close()


async def test_append_when_its_runs_month_has_no_partition_then_made_and_stored(
    database_url: str,
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("INSERT INTO runs (run_id, run_month) VALUES ('far', '2031-05-01')")
        log = await EventLog.open(database_url)
        try:
            result = await log.append("far", [{"type": "E", "n": i} for i in range(3)])
            big = await log.append("far", [{"type": "E", "n": i} for i in range(1500)])
        finally:
            await log.close()
        assert (result.last_seq, big.last_seq) == (3, 1503)
        assert "events_2031_05" in await _names(conn)
        count = await conn.fetchval("SELECT sum(n) FROM events_2031_05 WHERE run_id = 'far'")
        assert count == 1503
    finally:
        await conn.close()


_PLANNED = [
    ("read_events", ("$RUN", 0, 100)),
    ("read_page", ("$RUN", 0, 100)),
    ("stored_range", ("$RUN", 1, 3)),
    ("run_chunks", ("$RUN",)),
    ("stream_read_own", ("$RUN", 0, 100, 100)),
    ("stream_read", ("$RUN", 0, 100, 100)),
    ("stream_read_own_json", ("$RUN", 0, 100, 100, 1_000_000)),
    ("delete_event_range", ("$RUN", 0)),
    # Last: it erases the run (its id is refused from then on).
    ("erase_run", ("$RUN", 0, "00", "test", "plan")),
]


@pytest.mark.parametrize(("name", "args"), _PLANNED, ids=[name for name, _ in _PLANNED])
async def test_per_run_statements_when_generic_plan_then_one_partition_read(
    database_url: str, name: str, args: tuple[object, ...]
) -> None:
    log = await EventLog.open(database_url)
    try:
        await log.load_runs([_run("plan-old", date(2024, 6, 1), 5)])
        await log.append("plan-now", [{"type": "E", "n": i} for i in range(5)])
    finally:
        await log.close()
    conn = await asyncpg.connect(database_url)
    try:
        assert len(await _names(conn)) >= 3
        # asyncpg's prepared statements go generic after five runs; force it at once.
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        for run in ("plan-old", "plan-now"):
            values = [run if a == "$RUN" else a for a in args]
            literal = ", ".join(f"'{v}'" if isinstance(v, str) else str(v) for v in values)
            await conn.execute(f"PREPARE q AS {QUERIES[name]}")
            try:
                plan = await conn.fetch(
                    f"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE q({literal})"
                )
            finally:
                await conn.execute("DEALLOCATE q")
            lines = [row[0] for row in plan]
            scanned = {
                word
                for line in lines
                if "Scan" in line and " on events_" in line and "never executed" not in line
                for word in line.split()
                if partitions.month_named(word) is not None
            }
            assert len(scanned) == 1, "\n".join(lines)
    finally:
        await conn.close()


async def _prune_setup(database_url: str) -> None:
    log = await EventLog.open(database_url)
    try:
        await log.load_runs(
            [
                _run("old-1", OLD, 30),
                _run("old-2", OLD, 5),
                _run("held-open", HELD, 4, closed=False),
                _run("held-closed", HELD, 6),
                _run("source", SOURCE, 8),
            ]
        )
        await log.append("now-1", [{"type": "E", "n": i} for i in range(7)], close=True)
        await log.append("fork", [{"type": "E", "n": i} for i in range(2)])
    finally:
        await log.close()
    conn = await asyncpg.connect(database_url)
    try:
        # A run of this month forked from `source` at its seq 5 (as agent_replay.log.streams
        # stores a fork: its prefix is read from the source's events).
        await conn.execute("UPDATE runs SET last_seq = 7 WHERE run_id = 'fork'")
        await conn.execute("UPDATE events SET seq = seq + 5 WHERE run_id = 'fork'")
        await conn.execute("INSERT INTO run_forks VALUES ('fork', 'source', 5)")
    finally:
        await conn.close()


async def _events(conn: asyncpg.Connection) -> dict[str, list[str]]:
    rows = await conn.fetch("SELECT run_id, chunk FROM events ORDER BY run_id, seq")
    out: dict[str, list[str]] = {}
    for row in rows:
        out.setdefault(row["run_id"], []).append(row["chunk"])
    return out


async def test_prune_when_a_month_is_all_closed_then_its_partition_dropped_whole(
    databases: Databases,
) -> None:
    url = await databases.clone()
    try:
        await _prune_setup(url)
        conn = await asyncpg.connect(url)
        try:
            before = await _events(conn)
            log = await EventLog.open(url)
            try:
                fork_before = [e.chunk for e in await log.read_events("fork", 0, 100)]
                counted = await log.count_prunable(datetime.now(UTC) + timedelta(days=1))
                assert counted.partitions == [OLD]
                report = await log.prune(datetime.now(UTC) + timedelta(days=1), batch_events=10)
                fork_after = [e.chunk for e in await log.read_events("fork", 0, 100)]
            finally:
                await log.close()
            assert report.partitions == [OLD]
            assert set(report.held) == {HELD, SOURCE}
            assert "1 open" in report.held[HELD]
            assert "forks" in report.held[SOURCE]
            names = await _names(conn)
            assert partitions.name_of(OLD) not in names
            gone = await conn.fetchval("SELECT to_regclass($1)", partitions.name_of(OLD))
            assert gone is None  # dropped, not merely detached
            assert {partitions.name_of(HELD), partitions.name_of(SOURCE)} <= names
            after = await _events(conn)
            # The dropped month's runs went whole (rows too); the held months keep their
            # open run and the fork's source; closed runs elsewhere went row by row.
            assert set(after) == {"held-open", "source", "fork"}
            assert {r: before[r] for r in after} == after
            assert fork_after == fork_before and len(fork_after) == 7
            runs = {r[0] for r in await conn.fetch("SELECT run_id FROM runs")}
            assert runs == {"held-open", "source", "fork"}
            assert report.runs == 4  # old-1, old-2 whole; held-closed, now-1 by rows
        finally:
            await conn.close()
    finally:
        await databases.drop(url)


async def test_prune_when_appends_run_meanwhile_then_none_lost(databases: Databases) -> None:
    url = await databases.clone()
    try:
        log = await EventLog.open(url)
        try:
            await log.load_runs([_run(f"drop-{i}", OLD, 200) for i in range(20)])
            stop, started = asyncio.Event(), asyncio.Event()
            acknowledged: dict[str, int] = {}

            async def produce(run_id: str) -> None:
                while not stop.is_set():
                    result = await log.append(run_id, [{"type": "E"}] * 3)
                    acknowledged[run_id] = result.last_seq
                    if len(acknowledged) == 4:
                        started.set()

            producers = [asyncio.create_task(produce(f"live-{i}")) for i in range(4)]
            await asyncio.wait_for(started.wait(), 30)
            report = await log.prune(datetime.now(UTC) - timedelta(days=1))
            stop.set()
            await asyncio.gather(*producers)
        finally:
            await log.close()
        assert report.partitions == [OLD] and report.runs == 20
        conn = await asyncpg.connect(url)
        try:
            for run_id, last in acknowledged.items():
                seqs = [r[0] for r in await conn.fetch(
                    "SELECT seq FROM events WHERE run_id = $1 ORDER BY seq", run_id
                )]  # fmt: skip
                assert seqs == list(range(1, last + 1))
            assert await conn.fetchval("SELECT to_regclass($1)", partitions.name_of(OLD)) is None
        finally:
            await conn.close()
    finally:
        await databases.drop(url)


async def test_prune_when_interrupted_after_detach_then_next_prune_drops_the_table(
    databases: Databases,
) -> None:
    url = await databases.clone()
    try:
        log = await EventLog.open(url)
        try:
            await log.load_runs([_run("left", OLD, 3)])
            conn = await asyncpg.connect(url)
            try:
                # As a prune stopped between its DETACH and its DROP leaves it.
                await conn.execute("DELETE FROM runs WHERE run_id = 'left'")
                await conn.execute(f"ALTER TABLE events DETACH PARTITION {partitions.name_of(OLD)}")
                await log.prune(datetime.now(UTC))
                assert (
                    await conn.fetchval("SELECT to_regclass($1)", partitions.name_of(OLD)) is None
                )
            finally:
                await conn.close()
        finally:
            await log.close()
    finally:
        await databases.drop(url)
