"""The `LogStore` contract, as a suite any implementation runs.

Modelled on eventsourcing's `ApplicationRecorderTestCase`: the tests are
written against the Protocol only (`agent_replay.log.store.LogStore`), and an
implementation runs them by subclassing `LogStoreContract` and providing a
`store` fixture that yields a fresh, working store, a `second_store` fixture
(another handle on the same log, as another process would have) and a
`lagging` fixture (a `Lagging`: a store whose catch-up reads go to a standby
that holds a run only as far as `replay` brought it):

    class TestMyStore(LogStoreContract):
        @pytest.fixture
        async def store(self, database_url: str) -> AsyncIterator[LogStore]: ...

        @pytest.fixture
        async def second_store(self, database_url: str) -> AsyncIterator[LogStore]: ...

        @pytest.fixture
        async def lagging(self, database_url: str) -> AsyncIterator[Lagging]: ...

It runs against `EventLog` in both row layouts (`test_eventlog_contract.py`) and
against the in-memory `MemoryStore` (`test_memory_contract.py`); every member of
`LogStore` is exercised here. Each test uses run ids of its own, so the suite may
share one database. The non-interleaving test is the heart of it: concurrent
appends to one run, from two store handles, each get one contiguous block of
seqs, the blocks partition 1..N, and a reader polling meanwhile never sees a
seq appear at or below a `last_seq` it already saw.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay import chain
from agent_replay.chain import fold
from agent_replay.errors import (
    Erased,
    InvalidRunId,
    RedactionConflict,
    ReplayError,
    RunClosed,
    RunConflict,
    RunNotFound,
    SeqConflict,
    ThreadNotFound,
)
from agent_replay.ingest import Limits, chunk_from_text
from agent_replay.log import MAX_SEQ, Held, LogStore, Notice, Redaction
from agent_replay.log.chunks import stored
from agent_replay.log.filters import EventFilter, RunFilter
from agent_replay.log.notifications import thread_key
from agent_replay.log.typefilter import TypeFilter
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord

DEADLINE = 10.0


def new_run(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def chunk(kind: str = "A", **fields: Any) -> dict[str, Any]:
    return {"type": kind, **fields}


async def texts(store: LogStore, run_id: str) -> list[dict[str, Any]]:
    return [json.loads(e.chunk) for e in await store.read_events(run_id, 0, 100_000)]


class Lagging(Protocol):
    """A store reading catch-ups (`read_page(catch_up=True)`, `read_events(through=...)`)
    from a standby that has each run only as the last `replay` of it left it."""

    @property
    def store(self) -> LogStore: ...

    async def replay(self, run_id: str) -> None:
        """The standby has `run_id` as the primary has it now (then lags again)."""

    def standby_reads(self) -> int:
        """How many catch-up reads the standby has answered so far, wholly or in part."""
        ...


def replace_record(record: RunRecord, **changes: Any) -> RunRecord:
    return dataclasses.replace(record, **changes)


def _loaded(
    run_id: str, created: datetime, closed: datetime | None, kinds: list[str], **fields: Any
) -> LoadedRun:
    """An exported run of these chunk types, one a second from `created`."""
    events = [
        LoggedEvent(stored(chunk(kind, i=i), i), created + timedelta(seconds=i + 1))
        for i, kind in enumerate(kinds)
    ]
    record = RunRecord(
        **{
            "run_id": run_id,
            "thread_id": "t-1",
            "agent": None,
            "status": "running" if closed is None else "finished",
            "created_at": created,
            "updated_at": closed or created,
            "closed_at": closed,
            "last_seq": len(kinds),
            "error_message": None,
            "metadata": {"from": "export"},
            "input": None,
            **fields,
        }
    )
    return LoadedRun(record, events)


class LogStoreContract:
    """Subclass with `store` and `second_store` fixtures (see the module docstring)."""

    # -- appends ------------------------------------------------------------

    async def test_append_when_run_new_then_seqs_from_one_and_chunks_read_back_in_order(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-new")
        first = await store.append(run_id, [chunk("A", n=1), chunk("B", n=2)])
        second = await store.append(run_id, [chunk("C", n=3)])
        assert (first.first_seq, first.last_seq) == (1, 2)
        assert (second.first_seq, second.last_seq) == (3, 3)
        events = await store.read_events(run_id)
        assert [(e.seq, e.type) for e in events] == [(1, "A"), (2, "B"), (3, "C")]
        assert [json.loads(e.chunk)["n"] for e in events] == [1, 2, 3]
        run = await store.get_run(run_id)
        assert (run.last_seq, run.closed, run.status) == (3, False, "running")

    async def test_append_when_redaction_counts_then_summed_per_rule_in_it_and_listed(
        self, store: LogStore
    ) -> None:
        thread = new_run("c-red-thread")
        plain, redacted = new_run("c-red-0"), new_run("c-red-1")
        for run_id in (plain, redacted):
            await store.append(run_id, [{"type": "RUN_STARTED", "threadId": thread}])
        assert (await store.get_run(redacted)).redactions is None
        await store.append(redacted, [chunk("A")], redaction=Redaction({}))
        assert (await store.get_run(redacted)).redactions is None
        await store.append(redacted, [chunk("B")], redaction=Redaction({"email": 2}))
        assert (await store.get_run(redacted)).redactions == {"email": 2}
        await store.append(redacted, [chunk("C")], redaction=Redaction({"email": 1, "card": 4}))
        run = await store.get_run(redacted)
        assert run.redactions == {"email": 3, "card": 4}
        assert run.to_json()["redactions"] == {"email": 3, "card": 4}
        assert (await store.get_run(plain)).to_json()["redactions"] == {}
        for wanted, found in ((True, [redacted]), (False, [plain])):
            page = await store.list_runs(RunFilter(thread_id=thread, redacted=wanted), 10, None)
            assert [r.run_id for r in page] == found

    async def test_append_when_hold_read_is_current_then_stored_with_hold_and_counts(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-hold")
        assert await store.read_hold(run_id) is None
        first = await store.append(
            run_id, [chunk("A")], redaction=Redaction({}, Held(0, False, None), "h1")
        )
        assert (first.first_seq, first.last_seq) == (1, 1)
        assert await store.read_hold(run_id) == Held(1, False, "h1")
        # Nothing stored, the hold moved: the run's last seq stays, its hold does not.
        empty = await store.append(
            run_id, [], redaction=Redaction({"email": 1}, Held(1, False, "h1"), "h2")
        )
        assert (empty.first_seq, empty.last_seq) == (None, 1)
        assert await store.read_hold(run_id) == Held(1, False, "h2")
        await store.append(run_id, [chunk("B")], redaction=Redaction({}, Held(1, False, "h2")))
        assert await store.read_hold(run_id) == Held(2, False, None)
        assert (await store.get_run(run_id)).redactions == {"email": 1}

    async def test_append_when_hold_moved_since_read_then_redaction_conflict_and_nothing_written(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-hold-moved")
        await store.append(
            run_id, [chunk("A")], redaction=Redaction({}, Held(0, False, None), "h1")
        )
        stale = [
            Held(0, False, None),  # the seq moved
            Held(1, False, None),  # the hold moved at the same seq
            Held(1, False, "h0"),
        ]
        for read in stale:
            with pytest.raises(RedactionConflict):
                await store.append(run_id, [chunk("X")], redaction=Redaction({"email": 1}, read))
        # With the seq the producer expects, at that seq: the same conflict, not a seq one.
        with pytest.raises(RedactionConflict):
            await store.append(
                run_id,
                [chunk("X")],
                expected_seq=2,
                redaction=Redaction({"email": 1}, Held(1, False, "h0")),
            )
        with pytest.raises(SeqConflict):
            await store.append(
                run_id,
                [chunk("X")],
                expected_seq=5,
                redaction=Redaction({"email": 1}, Held(4, False, "h1")),
            )
        assert await store.read_hold(run_id) == Held(1, False, "h1")
        assert (await store.get_run(run_id)).redactions is None
        assert [e.type for e in await store.read_events(run_id)] == ["A"]

    async def test_append_when_guarded_retry_already_stored_then_same_answer(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-hold-retry")
        guard = Redaction({"email": 1}, Held(0, False, None), "h1")
        first = await store.append(run_id, [chunk("A")], expected_seq=1, redaction=guard)
        again = await store.append(run_id, [chunk("A")], expected_seq=1, redaction=guard)
        assert again == first
        assert (await store.get_run(run_id)).redactions == {"email": 1}
        assert await store.read_hold(run_id) == Held(1, False, "h1")

    async def test_append_when_create_false_and_run_missing_then_run_not_found(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-missing")
        with pytest.raises(RunNotFound):
            await store.append(run_id, [chunk()], create=False)
        assert await store.find_run(run_id) is None

    async def test_append_when_expected_seq_fits_retries_or_misfits_then_once_or_conflict(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-expected")
        await store.append(run_id, [chunk("A")])
        done = await store.append(run_id, [chunk("B"), chunk("C")], expected_seq=2)
        again = await store.append(run_id, [chunk("B"), chunk("C")], expected_seq=2)
        assert (done.first_seq, done.last_seq) == (again.first_seq, again.last_seq) == (2, 3)
        with pytest.raises(SeqConflict) as caught:
            await store.append(run_id, [chunk("X"), chunk("C")], expected_seq=2)
        assert caught.value.extra["last_seq"] == 3
        assert [c["type"] for c in await texts(store, run_id)] == ["A", "B", "C"]

    async def test_append_when_run_closed_then_run_closed_and_nothing_added(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-closed")
        await store.append(run_id, [chunk("RUN_FINISHED")], close=True)
        with pytest.raises(RunClosed):
            await store.append(run_id, [chunk()])
        closed = await store.close_run(run_id)  # idempotent
        assert (closed.closed, closed.status, closed.last_seq) == (True, "finished", 1)

    async def test_append_when_closed_with_a_status_then_that_status_recorded(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-status")
        await store.append(run_id, [chunk("RUN_STARTED")])
        await store.append(
            run_id, [chunk("RUN_ERROR", message="stop")], close=True, close_status="cancelled"
        )
        run = await store.get_run(run_id)
        assert (run.status, run.error_message, run.last_terminal) == (
            "cancelled",
            "stop",
            "RUN_ERROR",
        )

    async def test_append_when_run_error_has_a_code_then_run_keeps_it_until_the_next_terminal(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-code")
        await store.append(run_id, [chunk("RUN_ERROR", message="gone", code="abandoned")])
        run = await store.get_run(run_id)
        assert (run.error_message, run.error_code) == ("gone", "abandoned")
        # Other chunks leave it; a later terminal replaces it (RUN_FINISHED: no code).
        await store.append(run_id, [chunk("TEXT_MESSAGE_CONTENT", code="not-a-terminal")])
        assert (await store.get_run(run_id)).error_code == "abandoned"
        await store.append(run_id, [chunk("RUN_FINISHED")])
        run = await store.get_run(run_id)
        assert (run.error_message, run.error_code) == (None, None)
        # TanStack's form; in one append the last terminal wins.
        await store.append(
            run_id,
            [
                chunk("RUN_ERROR", message="first", code="first"),
                chunk("RUN_ERROR", error={"message": "rate", "code": "rate_limited"}),
            ],
        )
        assert (await store.get_run(run_id)).error_code == "rate_limited"
        # A group big enough for the COPY path keeps it alike.
        many = [chunk() for _ in range(1500)] + [chunk("RUN_ERROR", message="big", code="big")]
        await store.append(run_id, many)
        assert (await store.get_run(run_id)).error_code == "big"
        # No code, or not a string: none kept, the message still is.
        await store.append(run_id, [chunk("RUN_ERROR", message="x", code=7)], close=True)
        run = await store.get_run(run_id)
        assert (run.error_message, run.error_code, run.status) == ("x", None, "error")

    async def test_append_when_error_code_long_or_unstorable_then_cut_and_group_still_commits(
        self, store: LogStore
    ) -> None:
        long, odd = new_run("c-long"), new_run("c-odd")
        await asyncio.gather(
            store.append(long, [chunk("RUN_ERROR", message="m", code="x" * 100_000)]),
            store.append(odd, [chunk("RUN_ERROR", message="m", code="a\u0000b\ud800")]),
        )
        assert (await store.get_run(long)).error_code == "x" * 200
        assert (await store.get_run(odd)).error_code == "a\ufffdb\ufffd"
        # The chunks themselves are kept whole.
        assert (await texts(store, long))[0]["code"] == "x" * 100_000

    async def test_append_when_run_id_malformed_then_invalid_run_id(self, store: LogStore) -> None:
        with pytest.raises(InvalidRunId):
            await store.append("bad id", [chunk()])

    async def test_create_run_when_repeated_then_idempotent_and_other_thread_conflicts(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-create")
        run, created = await store.create_run(run_id, thread_id="t", metadata={"k": 1})
        again, created_again = await store.create_run(run_id, thread_id="t", metadata={"k": 1})
        assert (created, created_again) == (True, False)
        assert again.run_id == run.run_id and again.metadata == {"k": 1}
        with pytest.raises(RunConflict):
            await store.create_run(run_id, thread_id="other")

    async def test_on_commit_when_append_acknowledged_then_hook_has_been_told(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-hook")
        told: list[tuple[str, int, bool]] = []
        remove = store.on_commit(lambda *hint: told.append(hint) if hint[0] == run_id else None)
        try:
            await store.append(run_id, [chunk(), chunk()])
            assert told == [(run_id, 2, False)]
            await store.close_run(run_id)
            assert told[-1] == (run_id, 2, True)
        finally:
            remove()

    async def test_on_commit_rows_when_appends_acknowledged_then_rows_as_stored_in_order(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-rows")
        told: list[tuple[list[tuple[int, str]] | None, int, bool]] = []
        remove = store.on_commit_rows(
            lambda run, rows, last, closed: (
                told.append((rows, last, closed)) if run == run_id else None
            )
        )
        try:
            # Text the log keeps as sent: odd spacing, escapes, non-ASCII.
            sent = chunk_from_text('{"type":"A",  "s":"caf\\u00e9 \\n \\u0000 ☕"}', 0, Limits())
            await store.append(run_id, [sent, chunk(n=2)])
            await asyncio.gather(*(store.append(run_id, [chunk(n=i)]) for i in range(3, 9)))
            await store.close_run(run_id)
        finally:
            remove()
        stored = [(e.seq, e.chunk) for e in await store.read_events(run_id, 0, 100)]
        # Every commit's rows, in commit order, together exactly the stored events.
        assert [row for rows, _, _ in told for row in rows or []] == stored
        assert all(rows is not None and (not rows or rows[-1][0] == last) for rows, last, _ in told)
        assert told[-1] == ([], 8, True)
        assert not any(closed for _, _, closed in told[:-1])

    async def test_on_commit_rows_when_wants_given_then_only_wanted_runs_told(
        self, store: LogStore
    ) -> None:
        wanted, other = new_run("c-want"), new_run("c-unwanted")
        told: list[str] = []
        asked: set[str] = set()

        def wants(run: str) -> bool:
            asked.add(run)
            return run == wanted

        remove = store.on_commit_rows(lambda run, rows, last, closed: told.append(run), wants)
        try:
            # Side by side: most likely one group holding both runs.
            await asyncio.gather(
                *(store.append(run, [chunk(n=i)]) for i in range(1, 6) for run in (wanted, other))
            )
        finally:
            remove()
        assert {wanted, other} <= asked
        assert told and set(told) == {wanted}

    async def test_submit_append_when_queued_then_futures_settle_as_append_would(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-submit")
        await store.create_run(run_id)
        # Queued at once, in submission order, without awaiting the first.
        first = store.submit_append(
            run_id, [stored(chunk("A"), 0), stored(chunk("B"), 1)], expected_seq=1
        )
        second = store.submit_append(run_id, [stored(chunk("C"), 0)], expected_seq=3)
        done = await asyncio.gather(first, second)
        assert [(d.run_id, d.first_seq, d.last_seq) for d in done] == [
            (run_id, 1, 2),
            (run_id, 3, 3),
        ]
        with pytest.raises(SeqConflict):
            await store.submit_append(run_id, [stored(chunk("X"), 0)], expected_seq=2)
        missing = new_run("c-submit-missing")
        with pytest.raises(RunNotFound):  # create=False unless asked
            await store.submit_append(missing, [stored(chunk(), 0)], expected_seq=1)
        assert await store.find_run(missing) is None
        made = await store.submit_append(missing, [stored(chunk(), 0)], expected_seq=1, create=True)
        assert (made.first_seq, made.last_seq) == (1, 1)
        assert [c["type"] for c in await texts(store, run_id)] == ["A", "B", "C"]

    async def test_settled_when_a_commit_is_visible_then_its_rows_have_been_told(
        self, store: LogStore
    ) -> None:
        """A reader may see a commit (a read, a notification) before the committing
        handle's hooks have its rows: `settled` is how it waits for them."""
        run_id = new_run("c-settled")
        told = [0]
        seqs: list[int] = []

        def hook(run: str, rows: list[tuple[int, str]] | None, last: int, closed: bool) -> None:
            if run == run_id:
                told.append(last)
                seqs.extend(seq for seq, _ in rows or [])

        remove = store.on_commit_rows(hook)
        writers = [asyncio.create_task(store.append(run_id, [chunk(n=i)])) for i in range(30)]
        seen = 0
        try:
            async with asyncio.timeout(DEADLINE):
                while seen < 30:
                    page = await store.read_page(run_id, 0, 1000)
                    if page is not None:
                        await store.settled(run_id)
                        assert max(told) >= page.state.last_seq
                        seen = page.state.last_seq
                    await asyncio.sleep(0)
        finally:
            await asyncio.gather(*writers, return_exceptions=True)
            remove()
        assert seqs == list(range(1, 31))

    # -- reads --------------------------------------------------------------

    async def test_read_page_when_after_and_limit_given_then_rows_and_state_from_one_read(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-page")
        await store.append(run_id, [chunk(n=i) for i in range(1, 6)])
        page = await store.read_page(run_id, 1, 2)
        assert page is not None
        assert [seq for seq, _ in page.rows] == [2, 3]
        assert json.loads(page.rows[0][1]) == chunk(n=2)
        assert (page.state.last_seq, page.state.closed, page.complete) == (5, False, False)
        await store.close_run(run_id)
        tail = await store.read_page(run_id, 3, 10)
        assert tail is not None and [s for s, _ in tail.rows] == [4, 5] and tail.complete
        assert await store.read_page(new_run("c-page-none"), 0, 10) is None

    async def test_read_states_when_some_runs_missing_then_only_existing_answered(
        self, store: LogStore
    ) -> None:
        a, b, missing = new_run("c-st"), new_run("c-st"), new_run("c-st")
        await store.append(a, [chunk()])
        await store.append(b, [chunk(), chunk()], close=True)
        states = await store.read_states([a, b, missing])
        assert {k: (v.last_seq, v.closed) for k, v in states.items()} == {
            a: (1, False),
            b: (2, True),
        }

    async def test_appends_when_concurrent_from_two_handles_then_blocks_never_interleave(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        run_id = new_run("c-interleave")
        rng = random.Random(11)
        batches = [[chunk(f"W{w}", i=i) for i in range(rng.randint(1, 40))] for w in range(60)]
        seen_last = 0
        regressions: list[str] = []
        stop = asyncio.Event()

        async def write(w: int) -> tuple[int, int, int]:
            handle = store if w % 2 else second_store
            result = await handle.append(run_id, batches[w])
            assert result.first_seq is not None
            return w, result.first_seq, result.last_seq

        async def read() -> None:
            nonlocal seen_last
            known: dict[int, str] = {}
            while not stop.is_set():
                page = await store.read_page(run_id, 0, 100_000)
                if page is not None:
                    for seq, text in page.rows:
                        if seq <= seen_last and known.get(seq) != text:
                            regressions.append(f"seq {seq} appeared after last_seq {seen_last}")
                        known[seq] = text
                    seen_last = max(seen_last, page.state.last_seq)
                await asyncio.sleep(0)

        async with asyncio.timeout(DEADLINE * 3):
            reader = asyncio.create_task(read())
            results = await asyncio.gather(*(write(w) for w in range(len(batches))))
            stop.set()
            await reader
        assert regressions == []
        blocks = sorted((first, last, w) for w, first, last in results)
        expected_first = 1
        for first, last, w in blocks:
            assert (first, last - first + 1) == (expected_first, len(batches[w]))
            expected_first = last + 1
        stored = await texts(store, run_id)
        for first, last, w in blocks:
            assert stored[first - 1 : last] == batches[w]

    @settings(
        max_examples=15,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        sizes=st.lists(
            st.one_of(st.integers(1, 20), st.integers(250, 300), st.just(513)),
            min_size=1,
            max_size=6,
        ),
        reads=st.lists(st.tuples(st.floats(0, 1), st.integers(1, 700)), min_size=1, max_size=8),
    )
    async def test_property_appends_of_any_size_then_reads_from_any_seq_give_each_event_once(
        self, store: LogStore, sizes: list[int], reads: list[tuple[float, int]]
    ) -> None:
        """Appends small and large (past what one stored row holds), then reads from any
        seq with any limit, by page and by event: each the model's slice, in order."""
        run_id = new_run("c-sizes")
        model: list[tuple[int, str]] = []
        for size in sizes:
            kinds = [f"K{(len(model) + i) % 3}" for i in range(size)]
            done = await store.append(
                run_id, [chunk(kind, i=len(model) + i) for i, kind in enumerate(kinds)]
            )
            assert (done.first_seq, done.last_seq) == (len(model) + 1, len(model) + size)
            model += [(len(model) + i + 1, kind) for i, kind in enumerate(kinds)]
        for where, limit in reads:
            after = int(where * len(model))
            want = model[after : after + limit]
            events = await store.read_events(run_id, after, limit)
            assert [(e.seq, e.type) for e in events] == want
            assert [json.loads(e.chunk)["i"] for e in events] == [seq - 1 for seq, _ in want]
            page = await store.read_page(run_id, after, limit)
            assert page is not None and page.state.last_seq == len(model)
            assert [(seq, json.loads(text)["i"]) for seq, text in page.rows] == [
                (seq, seq - 1) for seq, _ in want
            ]
        # A retry of a large append at its expected seq is answered as the first time.
        first = len(model) + 1
        big = [chunk("R", i=i) for i in range(300)]
        done = await store.append(run_id, big, expected_seq=first)
        again = await store.append(run_id, big, expected_seq=first)
        assert (again.first_seq, again.last_seq) == (done.first_seq, done.last_seq)
        with pytest.raises(SeqConflict):
            await store.append(run_id, [*big[:-1], chunk("X")], expected_seq=first)
        assert len(await store.read_events(run_id, 0, 100_000)) == len(model) + 300

    async def test_bounds_when_at_the_largest_seq_then_answered_not_failed(
        self, store: LogStore
    ) -> None:
        """Seqs and offsets near the bigint limit are still plain answers: a retry check
        at that seq, reads after it (the reads' range arithmetic must not overflow)."""
        run_id = new_run("c-edge")
        await store.append(run_id, [chunk("A")] * 20)
        with pytest.raises(SeqConflict):
            await store.append(run_id, [chunk("B")], expected_seq=MAX_SEQ)
        for after in (MAX_SEQ - 1, MAX_SEQ):
            assert await store.read_events(run_id, after, 10_000) == []
            page = await store.read_page(run_id, after, 10_000)
            assert page is not None and page.rows == []
        assert len(await store.read_events(run_id, 0, 10_000)) == 20

    async def test_catch_up_when_the_standby_lags_then_the_primary_tops_the_read_up(
        self, lagging: Lagging
    ) -> None:
        store = lagging.store
        run_id = new_run("c-standby")
        await store.append(run_id, [chunk(n=i) for i in range(1, 6)])
        await lagging.replay(run_id)
        await store.append(run_id, [chunk(n=i) for i in range(6, 9)])  # not on the standby
        served = lagging.standby_reads()
        page = await store.read_page(run_id, 0, 100, catch_up=True)
        assert page is not None and (page.state.last_seq, page.state.closed) == (8, False)
        assert [(seq, json.loads(text)["n"]) for seq, text in page.rows] == [
            (n, n) for n in range(1, 9)
        ]
        events = await store.read_events(run_id, 2, 100, through=8)
        assert [(e.seq, json.loads(e.chunk)["n"]) for e in events] == [(n, n) for n in range(3, 9)]
        # The standby answered its part of both: not a primary read under another name.
        assert lagging.standby_reads() >= served + 2
        # A page the standby fills, and a run it has closed and whole: its answer as it is.
        head = await store.read_page(run_id, 0, 3, catch_up=True)
        assert head is not None and [s for s, _ in head.rows] == [1, 2, 3]
        await store.close_run(run_id)
        await lagging.replay(run_id)
        tail = await store.read_page(run_id, 4, 100, catch_up=True)
        assert tail is not None and tail.complete and [s for s, _ in tail.rows] == [5, 6, 7, 8]

    async def test_catch_up_when_the_standby_lacks_the_run_then_the_primary_answers(
        self, lagging: Lagging
    ) -> None:
        store = lagging.store
        run_id = new_run("c-standby-new")
        await store.append(run_id, [chunk(n=1), chunk(n=2)])
        page = await store.read_page(run_id, 0, 10, catch_up=True)
        assert page is not None and [s for s, _ in page.rows] == [1, 2]
        assert [e.seq for e in await store.read_events(run_id, 0, 10, through=2)] == [1, 2]
        assert await store.read_page(new_run("c-standby-none"), 0, 10, catch_up=True) is None

    # -- hints --------------------------------------------------------------

    async def test_listen_when_another_handle_commits_then_its_notices_arrive(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        run_id = new_run("c-listen")
        got: list[Notice] = []
        closed = asyncio.Event()

        def on_notices(notices: list[Notice]) -> None:
            got.extend(n for n in notices if n.run_id == run_id)
            if any(n.closed for n in got):
                closed.set()

        listening = await store.listen(on_notices, lambda: None)
        try:
            assert listening.listening
            await second_store.append(run_id, [chunk()])
            await second_store.close_run(run_id)
            async with asyncio.timeout(DEADLINE):
                await closed.wait()
        finally:
            await listening.stop()
        assert got == [Notice(run_id, 1, False), Notice(run_id, 1, True)]

    async def test_listen_when_runs_made_on_a_thread_by_any_handle_then_its_key_heard(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        thread = new_run("c-thread-heard") + " and\na line break"
        key = thread_key(thread)
        heard: list[str] = []
        twice = asyncio.Event()

        def on_threads(keys: list[str]) -> None:
            heard.extend(k for k in keys if k == key)
            if len(heard) >= 2:
                twice.set()

        listening = await store.listen(lambda _: None, lambda: None, on_threads=on_threads)
        try:
            # Made explicitly by the other handle, and by its first append on this one.
            await second_store.create_run(new_run("c-th-1"), thread_id=thread)
            opening = {"type": "RUN_STARTED", "threadId": thread, "runId": "x"}
            await store.append(new_run("c-th-2"), [opening])
            await store.append(new_run("c-th-none"), [chunk()])  # no thread: no notice
            async with asyncio.timeout(DEADLINE):
                await twice.wait()
        finally:
            await listening.stop()
        assert heard == [key, key]

    async def test_thread_runs_when_asked_after_a_run_then_the_later_runs_in_creation_order(
        self, store: LogStore
    ) -> None:
        thread = new_run("c-thread-order")
        # Ids out of alphabetical order: the order is the runs' creation.
        made = [new_run(f"c-to-{name}") for name in ("z", "a", "m", "b")]
        for run_id in made[:2]:
            await store.create_run(run_id, thread_id=thread)
        await store.append(made[2], [{"type": "RUN_STARTED", "threadId": thread, "runId": "x"}])
        await store.create_run(made[3], thread_id=thread)
        await store.close_run(made[3])
        await store.create_run(new_run("c-to-elsewhere"), thread_id=thread + "-other")
        runs = await store.thread_runs(thread)
        assert [r.run_id for r in runs] == made
        assert [(r.last_seq, r.closed) for r in runs] == [(0, False), (0, False), (1, False),
                                                          (0, True)]  # fmt: skip
        assert [r.run_id for r in await store.thread_runs(thread, runs[0].position, 2)] == made[1:3]
        assert await store.thread_runs(thread, runs[3].position) == []
        # Each run is stamped later than the one made before it: no tie for the id to break.
        assert len({r.created_at for r in runs}) == len(runs)
        assert await store.thread_runs(new_run("c-thread-none")) == []

    async def test_listen_when_own_handle_commits_then_rows_told_and_only_closes_notified(
        self, store: LogStore
    ) -> None:
        """This handle's own commits reach its `on_commit_rows` hooks, before the append
        returns; their notifications would say nothing new, so only the close is passed
        on (the close hooks hear of every close). No reader is woken twice per commit."""
        run_id = new_run("c-own")
        told: list[int] = []
        remove = store.on_commit_rows(
            lambda run, rows, last, closed: told.append(last) if run == run_id else None
        )
        got: list[Notice] = []
        closed = asyncio.Event()

        def on_notices(notices: list[Notice]) -> None:
            got.extend(n for n in notices if n.run_id == run_id)
            if any(n.closed for n in got):
                closed.set()

        listening = await store.listen(on_notices, lambda: None)
        try:
            for i in range(1, 31):
                await store.append(run_id, [chunk(n=i)])
                assert told[-1] == i
            await store.append(run_id, [chunk(n=31)], close=True)
            async with asyncio.timeout(DEADLINE):
                await closed.wait()  # one connection delivers in commit order
        finally:
            await listening.stop()
            remove()
        assert told == list(range(1, 32))
        assert got == [Notice(run_id, 31, True)]

    # -- leases -------------------------------------------------------------

    async def test_lease_when_held_then_others_refused_until_it_expires(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        run_id = new_run("c-lease")
        await store.create_run(run_id)
        assert await store.claim_lease(run_id, "a/1", 30)
        assert await store.claim_lease(run_id, "a/1", 30)  # ours already
        assert not await second_store.claim_lease(run_id, "b/1", 30)
        assert await store.renew_lease(run_id, "a/1", 0.05)
        assert not await second_store.renew_lease(run_id, "b/1", 30)
        async with asyncio.timeout(DEADLINE):
            # No event exists for "the lease ran out": poll the store, with a deadline.
            while run_id not in await second_store.expired_leases(10_000):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        assert await second_store.claim_expired_lease(run_id, "b/1", 30)
        assert not await store.renew_lease(run_id, "a/1", 30)  # taken over

    async def test_lease_when_run_closed_then_nothing_can_claim_or_renew_it(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-lease-closed")
        await store.create_run(run_id)
        assert await store.claim_lease(run_id, "a/1", 30)
        await store.close_run(run_id)
        assert not await store.renew_lease(run_id, "a/1", 30)
        assert not await store.claim_lease(run_id, "a/1", 30)

    async def test_renew_leases_when_some_closed_or_taken_then_only_ours_renewed(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        ours, closed, taken, missing = (new_run(f"c-renew-{n}") for n in range(4))
        for run_id in (ours, closed, taken):
            await store.create_run(run_id)
            assert await store.claim_lease(run_id, "a/1", 0.05 if run_id == taken else 30)
        await store.close_run(closed)
        async with asyncio.timeout(DEADLINE):
            # No event exists for "the lease ran out": poll the store, with a deadline.
            while taken not in await second_store.expired_leases(10_000):  # noqa: ASYNC110
                await asyncio.sleep(0.02)
        assert await second_store.claim_expired_lease(taken, "b/1", 30)
        kept = await store.renew_leases([ours, closed, taken, missing], "a/1", 30)
        assert kept == {ours}
        assert await store.renew_leases([], "a/1", 30) == set()
        # Renewed for the full lease: nobody can take it over now.
        assert ours not in await second_store.expired_leases(10_000)
        assert not await second_store.claim_lease(ours, "b/1", 30)

    async def test_orphaned_leases_when_instance_restarts_then_its_earlier_runs_taken_over(
        self, store: LogStore
    ) -> None:
        run_id, instance = new_run("c-orphan"), new_run("inst")
        await store.create_run(run_id)
        assert await store.claim_lease(run_id, f"{instance}/old", 30)
        assert await store.orphaned_leases(instance, f"{instance}/new") == [run_id]
        assert await store.take_over_lease(run_id, f"{instance}/new", 30, instance)
        assert await store.orphaned_leases(instance, f"{instance}/new") == []

    # -- readers (disconnect policies) -------------------------------------------

    async def test_readers_when_two_holders_then_run_read_until_the_last_one_leaves(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        run_id = new_run("c-readers")
        await store.create_run(run_id, on_disconnect="cancel_after", grace_seconds=5)
        assert await store.readers_heartbeat("a/1", [run_id]) == [run_id]
        assert await second_store.readers_heartbeat("b/1", [run_id]) == [run_id]
        # One of two holders leaves: the run is still read, no leave is recorded.
        assert await store.readers_left("a/1", [run_id], 30) == []
        absence = await store.reader_absence(run_id, 30)
        assert absence is not None and (absence.readers, absence.left_at) == (1, None)
        assert await second_store.readers_left("b/1", [run_id], 30) == [run_id]
        absence = await store.reader_absence(run_id, 30)
        assert absence is not None and absence.readers == 0 and absence.left_at is not None
        assert (await store.get_run(run_id)).reader_left_at == absence.left_at

    async def test_readers_when_last_holder_leaves_then_every_listener_told_once_per_run(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        told: list[str] = []
        arrived = asyncio.Event()

        def on_left(run_ids: list[str]) -> None:
            told.extend(run_ids)
            arrived.set()

        ours, others = new_run("c-told"), [new_run("c-many") for _ in range(45)]
        for run_id in (ours, *others):
            await store.create_run(run_id, on_disconnect="cancel")
        listening = await store.listen(lambda _: None, lambda: None, on_readers_left=on_left)
        try:
            await second_store.readers_heartbeat("a/1", [ours, *others])
            await second_store.readers_heartbeat("b/1", [ours])
            # Someone still reads `ours`: nobody is told of it yet.
            assert sorted(await second_store.readers_left("a/1", [ours, *others], 30)) == sorted(
                others
            )
            async with asyncio.timeout(DEADLINE):
                while len(told) < len(others):  # more than one NOTIFY's worth
                    await arrived.wait()
                    arrived.clear()
            assert sorted(told) == sorted(others)
            assert await second_store.readers_left("b/1", [ours], 30) == [ours]
            async with asyncio.timeout(DEADLINE):
                while ours not in told:
                    await arrived.wait()
                    arrived.clear()
            assert sorted(told) == sorted([*others, ours])
        finally:
            await listening.stop()

    async def test_readers_when_holder_stops_refreshing_then_its_last_beat_is_the_leave(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-stale")
        await store.create_run(run_id, on_disconnect="cancel")
        await store.readers_heartbeat("dead/1", [run_id])
        fresh = await store.reader_absence(run_id, 30)
        assert fresh is not None and (fresh.readers, fresh.left_at) == (1, None)
        # Fresh for no time at all: the row is a dead holder's, removed, its beat the leave.
        stale = await store.reader_absence(run_id, 0)
        assert stale is not None and stale.readers == 0 and stale.left_at is not None
        again = await store.reader_absence(run_id, 30)
        assert again is not None and (again.readers, again.left_at) == (0, stale.left_at)

    async def test_readers_when_policy_continue_or_run_closed_then_no_row_kept(
        self, store: LogStore
    ) -> None:
        plain, closed = new_run("c-plain"), new_run("c-closed")
        await store.create_run(plain, on_disconnect="continue")
        await store.create_run(closed, on_disconnect="cancel")
        await store.append(closed, [chunk()], close=True)
        assert await store.readers_heartbeat("a/1", [plain, closed, new_run("c-none")]) == []
        never = await store.reader_absence(plain, 30)
        assert never is not None and (never.readers, never.left_at) == (0, None)
        assert never.absent_seconds >= 0
        assert await store.reader_absence(new_run("c-missing"), 30) is None

    # -- administration -----------------------------------------------------

    async def test_load_runs_when_loaded_again_then_unchanged_and_a_different_copy_conflicts(
        self, store: LogStore
    ) -> None:
        run_id, other = new_run("c-load"), new_run("c-load-other")
        created = datetime.now(UTC) - timedelta(hours=1)
        closed = created + timedelta(minutes=5)
        kinds = ["RUN_STARTED", "TOOL_CALL_START", "RUN_FINISHED"]
        loaded = _loaded(run_id, created, closed, kinds)
        # What the maintained columns take from the events, as appends keep them.
        events = list(loaded.events)
        events[1] = LoggedEvent(
            stored(chunk("TOOL_CALL_START", toolCallName="search"), 1), events[1].received_at
        )
        usage = {"promptTokens": 2, "completionTokens": 3, "totalTokens": 5}
        events[2] = LoggedEvent(
            stored(chunk("RUN_FINISHED", usage=usage), 2), events[2].received_at
        )
        loaded = LoadedRun(loaded.record, events)
        report = await store.load_runs([loaded])
        assert (report.created, report.unchanged) == ([run_id], [])
        run = await store.get_run(run_id)
        assert (run.closed, run.status, run.last_seq, run.thread_id, run.metadata) == (
            True,
            "finished",
            3,
            "t-1",
            {"from": "export"},
        )
        assert (run.created_at, run.closed_at) == (created, closed)
        assert (run.last_terminal, run.tool_names, run.total_tokens) == (
            "RUN_FINISHED",
            ["search"],
            5,
        )
        stored_events = await store.read_events(run_id, 0, 10)
        assert [(e.seq, e.type, e.received_at) for e in stored_events] == [
            (seq, e.chunk.type, e.received_at) for seq, e in enumerate(events, start=1)
        ]
        again = await store.load_runs([loaded])
        assert (again.created, again.unchanged) == ([], [run_id])
        changed = LoadedRun(replace_record(loaded.record, status="error"), events)
        with pytest.raises(RunConflict):
            await store.load_runs([_loaded(other, created, None, ["A"]), changed])
        assert await store.find_run(other) is None  # all or nothing
        assert (await store.get_run(run_id)).status == "finished"

    async def test_prune_when_runs_closed_before_the_date_then_counted_then_only_they_go(
        self, store: LogStore
    ) -> None:
        # A date of this test's own, long past: other tests' runs all close after it.
        cut = datetime(1990, 1, 1, tzinfo=UTC) + timedelta(days=random.randrange(3650))
        old = [new_run("c-prune-old") for _ in range(2)]
        late = new_run("c-prune-late")
        born = cut - timedelta(days=3)
        before = await store.count_prunable(cut)
        await store.load_runs(
            [
                _loaded(old[0], born, cut - timedelta(days=2), ["A", "B", "C"]),
                _loaded(old[1], born, cut - timedelta(seconds=1), ["A", "B"]),
                _loaded(late, born, cut + timedelta(days=1), ["A"]),
            ]
        )
        recent = new_run("c-prune-recent")
        await store.append(recent, [chunk()], close=True)
        counted = await store.count_prunable(cut)
        assert (counted.runs - before.runs, counted.events - before.events) == (2, 5)
        assert counted.oldest is not None and counted.newest is not None
        assert counted.oldest <= cut - timedelta(days=2) and counted.newest < cut
        report = await store.prune(cut, batch_events=2)
        assert (report.runs, report.events) == (counted.runs, counted.events)
        for run_id in old:
            assert await store.find_run(run_id) is None
            assert await store.read_events(run_id) == []
        assert [e.seq for e in await store.read_events(late)] == [1]
        assert (await store.get_run(recent)).closed
        assert (await store.count_prunable(cut)).runs == 0

    async def test_schema_version_when_asked_then_every_handle_gives_one_answer(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        version = await store.schema_version()
        assert isinstance(version, str) and version
        assert await second_store.schema_version() == version

    async def test_pool_stats_when_read_then_in_use_within_size_within_max(
        self, store: LogStore, lagging: Lagging
    ) -> None:
        await store.read_states([new_run("c-pool")])
        assert store.replica_pool_stats() is None  # no standby
        assert lagging.store.replica_pool_stats() is not None
        for handle in (store, lagging.store):
            for stats in (
                handle.pool_stats(),
                handle.commit_pool_stats(),
                handle.replica_pool_stats(),
            ):
                if stats is not None:
                    assert 0 <= stats.in_use <= stats.size <= stats.max_size

    async def test_shared_secret_when_two_handles_race_then_both_keep_the_first_stored(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        name = new_run("c-secret")
        one, two = await asyncio.gather(
            store.shared_secret(name, "one"), second_store.shared_secret(name, "two")
        )
        assert one == two and one in ("one", "two")
        assert await store.shared_secret(name, "three") == one
        assert await second_store.shared_secret(name, "four") == one

    # -- audit and archive reads ----------------------------------------------

    async def test_list_runs_when_filtered_then_those_matching_newest_first_in_pages(
        self, store: LogStore
    ) -> None:
        thread = new_run("c-list")
        made: list[str] = []
        for i, (agent, end) in enumerate(
            [("a", "RUN_FINISHED"), ("b", "RUN_ERROR"), ("a", None), ("a", "RUN_FINISHED")]
        ):
            run_id = new_run(f"c-list{i}")
            await store.create_run(run_id, thread_id=thread, agent=agent)
            chunks = [chunk("TOOL_CALL_START", toolCallId="c", toolCallName=f"tool-{i % 2}")]
            if end is not None:
                chunks.append(chunk(end, message="failed") if end == "RUN_ERROR" else chunk(end))
            await store.append(run_id, chunks, close=end is not None)
            made.append(run_id)
        newest_first = made[::-1]

        async def listed(f: RunFilter, limit: int = 100) -> list[str]:
            found, after = [], None
            while True:
                page = await store.list_runs(f, limit, after)
                found += [run.run_id for run in page]
                if len(page) < limit:
                    return found
                after = (page[-1].created_at, page[-1].run_id)

        assert await listed(RunFilter(thread_id=thread)) == newest_first
        assert await listed(RunFilter(thread_id=thread), limit=1) == newest_first
        assert await listed(RunFilter(thread_id=thread, agent="a")) == [made[3], made[2], made[0]]
        assert await listed(RunFilter(thread_id=thread, statuses=("finished",))) == [
            made[3],
            made[0],
        ]
        assert await listed(RunFilter(thread_id=thread, statuses=("error", "running"))) == [
            made[2],
            made[1],
        ]
        assert await listed(RunFilter(thread_id=thread, tool="tool-1")) == [made[3], made[1]]
        assert await listed(RunFilter(thread_id=thread, has_error=True)) == [made[1]]
        assert await listed(RunFilter(thread_id=thread, has_error=False)) == [
            made[3],
            made[2],
            made[0],
        ]
        first = await store.get_run(made[0])
        assert await listed(RunFilter(thread_id=thread, created_before=first.created_at)) == []
        assert await listed(RunFilter(thread_id=thread, created_after=first.created_at)) == (
            newest_first
        )
        (run,) = await store.list_runs(RunFilter(thread_id=thread), 1)
        assert run == await store.get_run(made[3])

    async def test_read_filtered_when_types_patterns_or_times_then_only_those_in_seq_order(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-filter")
        kinds = ["RUN_STARTED", "TEXT_A", "TOOL_X", "TEXT_B", "TOOL_Y", "TEXT_A", "RUN_FINISHED"]
        await store.append(run_id, [chunk(k, n=i) for i, k in enumerate(kinds[:5])])
        for i, k in enumerate(kinds[5:], 5):
            await store.append(run_id, [chunk(k, n=i)])
        numbered = list(enumerate(kinds, 1))

        async def seqs(f: EventFilter, after: int = 0, limit: int = 100) -> list[int]:
            return [e.seq for e in await store.read_filtered(run_id, f, after, limit)]

        assert await seqs(EventFilter(types=("TEXT_A",))) == [2, 6]
        assert await seqs(EventFilter(patterns=TypeFilter.parse("TOOL_*,RUN_STARTED"))) == [
            1,
            3,
            5,
        ]
        for after in range(len(kinds) + 1):
            for limit in (1, 2):
                got = await seqs(EventFilter(types=("TEXT_A", "TEXT_B")), after, limit)
                assert got == [s for s, k in numbered if k.startswith("TEXT") and s > after][:limit]
        events = await store.read_events(run_id, 0, 100)
        assert await store.read_filtered(run_id, EventFilter(), 2, 3) == events[2:5]
        last = events[-1].received_at
        assert await seqs(EventFilter(types=("RUN_FINISHED",), received_before=last)) == []
        assert await seqs(EventFilter(types=("RUN_FINISHED",), received_after=last)) == [7]
        assert await seqs(EventFilter(received_after=last + timedelta(days=1))) == []

    async def test_run_records_when_a_thread_has_runs_then_each_oldest_first(
        self, store: LogStore
    ) -> None:
        thread = new_run("c-records")
        first, second = new_run("c-rec1"), new_run("c-rec2")
        await store.create_run(
            first, thread_id=thread, agent="x", metadata={"k": 1}, input={"messages": []}
        )
        await store.append(first, [chunk("RUN_FINISHED")], close=True)
        await store.create_run(second, thread_id=thread)
        record = await store.run_record(first)
        run = await store.get_run(first)
        assert record is not None
        assert (record.run_id, record.thread_id, record.agent, record.status) == (
            first,
            thread,
            "x",
            "finished",
        )
        assert (record.last_seq, record.metadata, json.loads(record.input or "null")) == (
            1,
            {"k": 1},
            {"messages": []},
        )
        assert (record.created_at, record.closed_at) == (run.created_at, run.closed_at)
        assert [r.run_id for r in await store.thread_records(thread)] == [first, second]
        assert await store.run_record(new_run("c-rec-missing")) is None
        assert await store.thread_records(new_run("c-thread-missing")) == []

    async def test_verify_run_when_appended_in_several_sizes_then_ok_with_the_chains_head(
        self, store: LogStore
    ) -> None:
        run_id = new_run("c-verify")
        for size in (1, 5, 300, 2):
            await store.append(run_id, [{"type": "M", "n": n} for n in range(size)])
        await store.close_run(run_id)
        events = await store.read_events(run_id, 0, 1000)
        verdict = await store.verify_run(run_id)
        assert verdict is not None
        assert verdict.to_json() == {
            "ok": True,
            "events": 308,
            "head": fold((e.seq, e.chunk) for e in events).hex(),
            "first_bad_seq": None,
            "reason": None,
        }
        empty = new_run("c-verify-empty")
        await store.create_run(empty)
        verdict = await store.verify_run(empty)
        assert verdict is not None and (verdict.ok, verdict.events, verdict.head) == (
            True, 0, bytes(32).hex())  # fmt: skip
        assert await store.verify_run(new_run("c-verify-missing")) is None

    async def test_projections_when_stored_then_found_only_at_their_last_seq_and_version(
        self, store: LogStore
    ) -> None:
        a, b = new_run("c-proj-a"), new_run("c-proj-b")
        await store.store_projections([(a, 3, "[1]"), (b, 5, "[2]")], False, "v1")
        assert await store.cached_projections({a: 3, b: 5}, False, "v1") == {a: "[1]", b: "[2]"}
        # Another last_seq (pruned and imported again), normalization or version: not it.
        assert await store.cached_projections({a: 4, b: 5}, False, "v1") == {b: "[2]"}
        assert await store.cached_projections({a: 3}, True, "v1") == {}
        assert await store.cached_projections({a: 3}, False, "v2") == {}
        assert await store.cached_projections({}, False, "v1") == {}
        await store.store_projections([(a, 4, "[3]")], False, "v2")
        assert await store.cached_projections({a: 4}, False, "v2") == {a: "[3]"}
        assert await store.cached_projections({a: 3}, False, "v1") == {}

    # -- erasure ------------------------------------------------------------

    async def test_erase_thread_when_erased_then_tombstones_exact_and_runs_refused_after(
        self, store: LogStore, second_store: LogStore
    ) -> None:
        thread, other = new_run("c-erase"), new_run("c-erase-keep")
        first, second, kept = new_run("c-er-a"), new_run("c-er-b"), new_run("c-er-k")
        await store.create_run(first, thread_id=thread, metadata={"who": "alice"})
        await store.append(first, [chunk("A", n=i) for i in range(7)], close=True)
        await store.append(second, [chunk("RUN_STARTED", threadId=thread, runId=second)])
        await store.append(second, [chunk("B", n=i) for i in range(300)])
        await store.create_run(kept, thread_id=other)
        await store.append(kept, [chunk("K")])
        before = {run: await store.read_events(run, 0, 10_000) for run in (first, second)}
        kept_before = (await store.get_run(kept), await store.read_events(kept, 0, 100))
        heard: list[Notice] = []
        ended = asyncio.Event()

        def on_notices(notices: list[Notice]) -> None:
            heard.extend(n for n in notices if n.run_id == second and n.closed)
            if heard:
                ended.set()

        listening = await second_store.listen(on_notices, lambda: None)
        try:
            tombstones = await store.erase_thread(thread, erased_by="key:test", reason="asked")
            async with asyncio.timeout(DEADLINE):
                await ended.wait()
        finally:
            await listening.stop()
        want = {
            run: (len(events), chain.fold((e.seq, e.chunk) for e in events).hex())
            for run, events in before.items()
        }
        assert {t.run_id: (t.events, t.head) for t in tombstones} == want
        assert [t.run_id for t in tombstones] == sorted(want)
        assert {(t.thread_id, t.erased_by, t.reason) for t in tombstones} == {
            (thread, "key:test", "asked")
        }
        assert len({t.erased_at for t in tombstones}) == 1
        # Nothing of the runs is left to read, on either handle.
        for handle in (store, second_store):
            for run in (first, second):
                assert await handle.find_run(run) is None
                assert await handle.read_page(run, 0, 10) is None
                assert await handle.run_record(run) is None
            assert await handle.thread_runs(thread) == []
            assert await handle.thread_records(thread) == []
        # Appends, re-creations and new runs on the thread are refused, on either handle.
        with pytest.raises(Erased):
            await second_store.append(second, [chunk()])
        with pytest.raises(Erased):
            await store.append(first, [chunk()], create=False)
        with pytest.raises(Erased):
            await store.create_run(first)
        with pytest.raises(Erased):
            await second_store.create_run(new_run("c-er-new"), thread_id=thread)
        with pytest.raises(Erased):
            await store.append(new_run("c-er-new"), [chunk("RUN_STARTED", threadId=thread)])
        # An import brings neither an erased run back nor a run onto the erased thread.
        at = datetime.now(UTC) - timedelta(hours=1)
        for loaded in (
            _loaded(first, at, at, ["A"], thread_id=None),
            _loaded(new_run("c-er-imp"), at, at, ["A"], thread_id=thread),
        ):
            with pytest.raises(Erased):
                await second_store.load_runs([loaded])
        # Again: the same tombstones; what they say is found by run and by thread.
        assert await second_store.erase_thread(thread, erased_by="key:other") == tombstones
        assert await store.tombstones(thread_id=thread) == tombstones
        assert await store.tombstones(run_ids=[second, kept, first]) == tombstones
        assert await store.tombstones(run_ids=[kept]) == []
        # Another thread is untouched; an unknown one is not found.
        assert (await store.get_run(kept), await store.read_events(kept, 0, 100)) == kept_before
        with pytest.raises(ThreadNotFound):
            await store.erase_thread(new_run("c-erase-none"), erased_by="key:test")

    # -- errors -------------------------------------------------------------

    async def test_failures_when_raised_then_they_are_service_errors_not_driver_errors(
        self, store: LogStore
    ) -> None:
        with pytest.raises(ReplayError) as caught:
            await store.create_run(new_run("c-fault"), metadata={"nul": "\u0000"})
        assert caught.value.status == 422 and caught.value.code == "invalid_request"
