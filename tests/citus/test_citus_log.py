"""The log on a real Citus cluster (a coordinator and two workers): the schema `agent-replay
migrate` distributes, where a run's rows land, group commits that write on one worker at a
time, and notifications that reach listeners on the coordinator."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta

import asyncpg
import pytest

from agent_replay import migrate
from agent_replay.errors import RedactionConflict
from agent_replay.log import EventLog, Held, Notice, Redaction, partitions
from agent_replay.log.chunks import stored as stored_chunk
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord
from tests.log.test_migrations import _diff
from tests.log.test_partitions import _run
from tests.support.citus import CitusCluster

DEADLINE = 10.0

PER_RUN = {"runs", "events", "run_projections", "stream_producers", "run_readers"}
REFERENCE = {"streams", "run_forks", "service_secrets", "run_tombstones"}


@pytest.fixture
async def log(database_url: str) -> AsyncIterator[EventLog]:
    async with EventLog.connect(database_url, pool_size=4) as opened:
        yield opened


async def _fetch(url: str, query: str, *args: object) -> list[asyncpg.Record]:
    # Citus hides shards from a session's catalog unless told not to.
    conn = await asyncpg.connect(url, server_settings={"citus.override_table_visibility": "off"})
    try:
        return list(await conn.fetch(query, *args))
    finally:
        await conn.close()


async def test_migrate_when_citus_then_at_head_and_models_agree(database_url: str) -> None:
    assert await migrate.current_revision(database_url) == migrate.head_revision()
    assert await _diff(database_url) == []


async def test_migrate_when_citus_then_per_run_tables_colocated_by_run_id(
    database_url: str,
) -> None:
    rows = await _fetch(
        database_url,
        "SELECT logicalrelid::text AS name, partmethod::text AS partmethod, colocationid,"
        " column_to_column_name(logicalrelid, partkey) AS key FROM pg_dist_partition",
    )
    tables = {r["name"]: r for r in rows}
    assert tables.keys() >= PER_RUN
    assert {tables[t]["key"] for t in PER_RUN} == {"run_id"}
    assert {tables[t]["colocationid"] for t in PER_RUN} == {tables["runs"]["colocationid"]}
    # events' monthly partitions are distributed with it, on the same shards.
    months = [n for n in tables if n.startswith("events_")]
    assert months
    assert {tables[m]["colocationid"] for m in months} == {tables["runs"]["colocationid"]}
    assert {n for n, r in tables.items() if r["partmethod"] == "n"} == REFERENCE
    # The coordinator's LISTEN backends: a table of the coordinator alone.
    assert "log_listeners" not in tables


async def test_appends_when_many_runs_then_rows_on_both_workers_and_read_back(
    citus: CitusCluster, log: EventLog
) -> None:
    runs = [f"spread-{uuid.uuid4().hex[:12]}" for _ in range(16)]
    for run in runs:
        await log.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": run}] * 3)
    for run in runs:
        assert [e.seq for e in await log.read_events(run, 0, 100)] == [1, 2, 3]
    held = []
    for worker in citus.worker_urls():
        shards = await _fetch(
            worker,
            "SELECT c.relname FROM pg_class c WHERE c.relname ~ '^events_[0-9]{4}_[0-9]{2}_[0-9]+$'"
            " AND c.relkind = 'r'",
        )
        found: set[str] = set()
        for shard in shards:
            rows = await _fetch(
                worker, f'SELECT DISTINCT run_id FROM "{shard["relname"]}" WHERE run_id = ANY($1)',
                runs,
            )  # fmt: skip
            found |= {r["run_id"] for r in rows}
        held.append(found)
    assert all(held), "each worker holds some of the runs"
    assert held[0] | held[1] == set(runs)
    assert not held[0] & held[1]


async def test_redacted_appends_when_on_citus_then_hold_guarded_and_counts_in_their_commit(
    log: EventLog,
) -> None:
    runs = [f"held-{uuid.uuid4().hex[:12]}" for _ in range(8)]
    for run in runs:
        first = Redaction({"email": 1}, Held(0, False, None), f"h-{run}")
        await log.append(run, [{"type": "CUSTOM", "value": 1}], redaction=first)
    for run in runs:
        assert await log.read_hold(run) == Held(1, False, f"h-{run}")
        assert (await log.get_run(run)).redactions == {"email": 1}
        with pytest.raises(RedactionConflict):
            stale = Redaction({"email": 5}, Held(1, False, None), None)
            await log.append(run, [{"type": "CUSTOM", "value": 2}], redaction=stale)
        current = Redaction({"card": 2}, Held(1, False, f"h-{run}"), None)
        await log.append(run, [{"type": "CUSTOM", "value": 3}], redaction=current)
        assert await log.read_hold(run) == Held(2, False, None)
        assert (await log.get_run(run)).redactions == {"email": 1, "card": 2}


async def test_group_commit_when_runs_on_both_workers_then_no_two_phase_commit(
    citus: CitusCluster, log: EventLog
) -> None:
    # Citus records every two-phase commit it coordinates in pg_dist_transaction until
    # its recovery (every minute by default) clears it: none may appear under the load.
    runs = [f"twopc-{uuid.uuid4().hex[:12]}" for _ in range(32)]
    tool = {"type": "TOOL_CALL_START", "toolCallId": "t1", "toolCallName": "search"}
    for run in runs:
        await log.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": "a"}])
    coordinator = citus.url()
    await _fetch(coordinator, "SELECT recover_prepared_transactions()")
    before = await _fetch(coordinator, "SELECT count(*) AS n FROM pg_dist_transaction")
    for round_ in range(4):
        # Appends to every run at once: the lanes gather them into groups of many runs,
        # on both workers; plain shares, and ones with something to record (a tool).
        chunk = tool if round_ % 2 else {"type": "TEXT_MESSAGE_CONTENT", "delta": "b"}
        await asyncio.gather(*(log.append(run, [chunk] * 3) for run in runs))
    after = await _fetch(coordinator, "SELECT count(*) AS n FROM pg_dist_transaction")
    assert after[0]["n"] == before[0]["n"]
    for run in runs:
        stored = await log.read_events(run, 0, 100)
        assert [e.seq for e in stored] == list(range(1, 14))
        assert (await log.get_run(run)).tool_names == ["search"]


async def test_listen_when_another_handle_commits_on_citus_then_notices_arrive(
    database_url: str, log: EventLog
) -> None:
    heard: asyncio.Queue[Notice] = asyncio.Queue()
    async with EventLog.connect(database_url, pool_size=2) as other:
        listener = await other.listen(lambda notices: [heard.put_nowait(n) for n in notices],
                                      lambda: None)  # fmt: skip
        try:
            runs = [f"heard-{uuid.uuid4().hex[:12]}" for _ in range(8)]
            await asyncio.gather(
                *(log.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}]) for run in runs)
            )
            waiting = set(runs)
            async with asyncio.timeout(DEADLINE):
                while waiting:
                    notice = await heard.get()
                    if notice.last_seq == 1:
                        waiting.discard(notice.run_id)
        finally:
            await listener.stop()


async def test_pg_notify_when_in_a_statement_routed_to_a_worker_then_runs_on_that_worker(
    citus: CitusCluster, database_url: str, log: EventLog
) -> None:
    """Why the log notifies from the coordinator on Citus: a pg_notify inside a statement
    Citus sends to a worker is queued there, where no replica listens."""
    run = f"where-{uuid.uuid4().hex[:12]}"
    await log.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}])
    channel = f"probe_{uuid.uuid4().hex[:8]}"
    listeners = [await asyncpg.connect(u) for u in [citus.url(), *citus.worker_urls()]]
    heard: list[asyncio.Queue[str]] = [asyncio.Queue() for _ in listeners]
    first = asyncio.Event()

    def told(queue: asyncio.Queue[str], payload: str) -> None:
        queue.put_nowait(payload)
        first.set()

    try:
        for conn, queue in zip(listeners, heard, strict=True):
            await conn.add_listener(channel, lambda *a, q=queue: told(q, a[3]))
        sender = await asyncpg.connect(database_url)
        try:
            await sender.execute(
                f"SELECT pg_notify('{channel}', run_id) FROM runs WHERE run_id = $1", run
            )
        finally:
            await sender.close()
        async with asyncio.timeout(DEADLINE):
            await first.wait()
        # Whatever else was queued has arrived once each listener answers a round trip.
        for conn in listeners:
            await conn.execute("SELECT 1")
        sizes = [q.qsize() for q in heard]
        assert sizes[0] == 0, "the coordinator's listener heard nothing"
        assert sorted(sizes[1:]) == [0, 1], "exactly one worker, the run's, queued it"
    finally:
        for conn in listeners:
            await conn.close()


def _loaded(run_id: str, events: int, *, closed: bool) -> LoadedRun:
    at = datetime.now(UTC)
    record = RunRecord(run_id, None, None, "finished" if closed else "running", at, at,
                       at if closed else None, events, None, {}, None)  # fmt: skip
    chunks = [stored_chunk({"type": "TEXT_MESSAGE_CONTENT", "delta": f"{run_id}:{k}"}, k)
              for k in range(events)]  # fmt: skip
    return LoadedRun(record, [LoggedEvent(chunk, at) for chunk in chunks])


async def test_migrate_when_a_populated_log_moves_onto_citus_then_every_event_kept(
    citus: CitusCluster,
) -> None:
    """An operator's move: a log used before revision 0014_citus (its tables the
    coordinator's own) is distributed by `agent-replay migrate`; every run reads back as it
    was, from the workers, and takes appends after."""
    url = await asyncio.to_thread(citus.create_database, f"moved_{uuid.uuid4().hex[:8]}")
    await asyncio.to_thread(migrate.upgrade, url, "0013_redaction")
    runs = [f"moved-{uuid.uuid4().hex[:12]}" for _ in range(12)]
    async with EventLog.connect(url, pool_size=2) as before:
        assert not before.citus
        # Loaded, not appended: this code's append statement writes columns of revisions
        # after 0014 (as a log used before it was written by the code of its day).
        await before.load_runs(
            [_loaded(run, i + 1, closed=i % 3 == 0) for i, run in enumerate(runs)]
        )
        stored = {run: await before.read_events(run, 0, 100) for run in runs}
    await asyncio.to_thread(migrate.upgrade, url)
    async with EventLog.connect(url, pool_size=2) as after:
        assert after.citus
        for run in runs:
            assert await after.read_events(run, 0, 100) == stored[run]
        open_runs = [run for i, run in enumerate(runs) if i % 3]
        for run in open_runs:
            await after.append(run, [{"type": "TEXT_MESSAGE_CONTENT", "delta": "after"}])
            assert (await after.get_run(run)).last_seq == len(stored[run]) + 1
    on_workers: set[str] = set()
    for worker in [w.url(url.rsplit("/", 1)[1]) for w in citus.workers]:
        for shard in await _fetch(
            worker, "SELECT relname FROM pg_class WHERE relname ~ '^runs_[0-9]+$'"
        ):
            rows = await _fetch(worker, f'SELECT run_id FROM "{shard["relname"]}"')
            on_workers |= {r["run_id"] for r in rows}
    assert on_workers == set(runs)


async def test_prune_when_a_past_month_is_all_closed_on_citus_then_its_partition_dropped(
    citus: CitusCluster,
) -> None:
    # A database of its own: the month's partition must hold only this test's runs.
    url = await asyncio.to_thread(citus.create_database, f"pruned_{uuid.uuid4().hex[:8]}")
    await asyncio.to_thread(migrate.upgrade, url)
    old, held = date(2025, 3, 1), date(2025, 4, 1)
    async with EventLog.connect(url, pool_size=2) as log:
        await log.load_runs(
            [_run("old-1", old, 5), _run("old-2", old, 3), _run("held-open", held, 2, closed=False)]
        )
        report = await log.prune(datetime.now(UTC) + timedelta(days=1), batch_events=10)
        assert report.partitions == [old]
        assert "1 open" in report.held[held]
        assert await log.find_run("old-1") is None and await log.find_run("old-2") is None
        assert [e.seq for e in await log.read_events("held-open", 0, 10)] == [1, 2]
    gone = await _fetch(url, "SELECT to_regclass($1) AS t", partitions.name_of(old))
    assert gone[0]["t"] is None  # dropped, not merely detached


async def test_migrate_when_citus_revision_downgraded_then_local_tables_and_up_again(
    citus: CitusCluster,
) -> None:
    url = await asyncio.to_thread(citus.create_database, f"downed_{uuid.uuid4().hex[:8]}")
    await asyncio.to_thread(migrate.upgrade, url)
    async with EventLog.connect(url, pool_size=2) as log:
        await log.append("kept", [{"type": "TEXT_MESSAGE_CONTENT", "delta": "x"}] * 3)
    await asyncio.to_thread(migrate.downgrade, url, "0013_redaction")
    left = await _fetch(url, "SELECT logicalrelid::text AS name FROM pg_dist_partition")
    assert not {r["name"] for r in left} & (PER_RUN | REFERENCE)
    # The erasure's trigger, which Citus does not allow on a distributed `runs`, is back.
    triggers = "SELECT tgname FROM pg_trigger WHERE tgrelid = CAST('runs' AS regclass)"
    assert "runs_refuse_erased" in {r["tgname"] for r in await _fetch(url, triggers)}
    async with EventLog.connect(url, pool_size=2) as log:
        assert not log.citus
        assert [e.seq for e in await log.read_events("kept", 0, 10)] == [1, 2, 3]
    await asyncio.to_thread(migrate.upgrade, url)
    assert await _diff(url) == []
    assert "runs_refuse_erased" not in {r["tgname"] for r in await _fetch(url, triggers)}
    async with EventLog.connect(url, pool_size=2) as log:
        assert log.citus
        assert [e.seq for e in await log.read_events("kept", 0, 10)] == [1, 2, 3]
