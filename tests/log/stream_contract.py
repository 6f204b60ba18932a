"""The `StreamStore` contract: Durable Streams' state in the log, as a suite.

As `tests.log.contract` does for `LogStore`: the tests are written against
`StreamStore`'s methods only, and an implementation runs them by subclassing
`StreamStoreContract` with three fixtures:

* `streams`: a fresh, working store;
* `second_streams`: another handle on the same log (another process's);
* `age`: `await age(name, seconds)` makes `seconds` pass for one stream (its
  TTL and `Stream-Expires-At` are judged `seconds` later), so expiry is tested
  without waiting for a clock.

Each test uses stream names of its own, so the suite may share one database.
What a stream is (a run whose events are its messages) is the log's rule;
which header means what is the protocol's (`agent_replay.durable`), not tested here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.errors import (
    ProducerEpochSeq,
    ProducerFenced,
    ProducerSeqGap,
    RunNotFound,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    StreamSeqConflict,
)
from agent_replay.log.chunks import stored
from agent_replay.log.streams import NewStream, Producer, StreamState, StreamStore, run_id_for
from agent_replay.log.values import StoredChunk

Age = Callable[[str, float], Awaitable[None]]
JSON = "application/json"


def new_name(prefix: str) -> str:
    # Names with `/` are no run ids: their runs get derived ids, a path the suite covers too.
    return f"{prefix}/{uuid.uuid4().hex[:12]}"


def messages(start: int, count: int) -> list[StoredChunk]:
    return [stored({"type": "M", "n": n}, i) for i, n in enumerate(range(start, start + count))]


def numbers(rows: list[tuple[int, str]]) -> list[int]:
    return [orjson.loads(text)["n"] for _, text in rows]


def spec(name: str, **fields: Any) -> NewStream:
    fields.setdefault("content_type", JSON)
    fields.setdefault("ttl_seconds", None)
    fields.setdefault("expires_at", None)
    fields.setdefault("closed", False)
    return NewStream(name, **fields)


async def state_of(store: StreamStore, name: str) -> StreamState:
    state = await store.lookup(name, touch=False)
    assert state is not None, name
    return state


async def read_all(store: StreamStore, name: str, after: int = 0, limit: int = 7) -> list[int]:
    """Every message after `after`, paged `limit` at a time as a client would."""
    state = await state_of(store, name)
    out: list[int] = []
    while after < state.last_seq:
        rows = await store.read(state, after, state.last_seq, limit)
        assert rows, (after, state.last_seq)
        out += numbers(rows)
        after = rows[-1][0]
    return out


async def read_all_json(store: StreamStore, name: str, after: int, limit: int) -> list[int]:
    """The same through the JSON catch-up (one body per page)."""
    state = await state_of(store, name)
    out: list[int] = []
    while after < state.last_seq:
        count, end, body = await store.read_json(state, after, state.last_seq, limit, 1 << 20)
        page = [m["n"] for m in orjson.loads("[" + body + "]")]
        assert 0 < count == len(page) <= limit and end > after
        out += page
        after = end
    return out


async def append(store: StreamStore, name: str, chunks: list[StoredChunk], **kw: Any) -> Any:
    state = await state_of(store, name)
    kw.setdefault("close", False)
    kw.setdefault("producer", None)
    kw.setdefault("stream_seq", None)
    return await store.append_guarded(state, chunks, **kw)


async def forked(store: StreamStore, name: str, source: str, at: int, **fields: Any) -> StreamState:
    src = await state_of(store, source)
    new = spec(
        name,
        fork_spec=orjson.dumps([source, at]).decode(),
        fork_source_run=src.run_id,
        fork_seq=at,
        **fields,
    )
    state, created = await store.create(new, [])
    assert created
    return state


class StreamStoreContract:
    """Subclass with `streams`, `second_streams` and `age` fixtures (see the module docstring)."""

    # -- create, append, read, close, delete ------------------------------------

    async def test_create_when_new_then_created_empty_and_same_again_is_found_not_made(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-create")
        state, created = await streams.create(spec(name), [])
        again, created_again = await streams.create(spec(name), [])
        assert (created, created_again) == (True, False)
        assert (state.last_seq, state.closed, state.content_type) == (0, False, JSON)
        assert again.run_id == state.run_id and again.last_seq == 0
        assert await streams.lookup(new_name("s-never"), touch=True) is None

    @pytest.mark.parametrize(
        "other",
        [
            {"content_type": "text/plain"},
            {"ttl_seconds": 60},
            {"expires_at": datetime(2999, 1, 1, tzinfo=UTC)},
            {"closed": True},
        ],
    )
    async def test_create_when_same_name_other_config_then_conflict_and_stream_unchanged(
        self, streams: StreamStore, other: dict[str, Any]
    ) -> None:
        name = new_name("s-conflict")
        await streams.create(spec(name), messages(1, 2))
        with pytest.raises(StreamConflict):
            await streams.create(spec(name, **other), messages(9, 1))
        state = await state_of(streams, name)
        assert (state.last_seq, state.closed, state.content_type) == (2, False, JSON)
        assert await read_all(streams, name) == [1, 2]

    async def test_create_when_initial_content_and_closed_then_both_in_one_step(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-initial")
        state, created = await streams.create(spec(name, closed=True), messages(1, 3))
        assert created and (state.last_seq, state.closed) == (3, True)
        assert await read_all(streams, name) == [1, 2, 3]
        with pytest.raises(StreamClosed) as caught:
            await append(streams, name, messages(4, 1))
        assert caught.value.last_seq == 3

    async def test_append_when_plain_then_seqs_follow_and_reads_give_them_in_order(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-append")
        await streams.create(spec(name), [])
        first = await append(streams, name, messages(1, 3))
        second = await append(streams, name, messages(4, 2))
        assert (first.last_seq, second.last_seq, second.duplicate) == (3, 5, False)
        # Through the log's own append (the group committer), as unguarded POSTs go.
        state = await state_of(streams, name)
        result = await streams.log.append(state.run_id, messages(6, 2), create=False)
        assert result.last_seq == 7
        assert await read_all(streams, name) == [1, 2, 3, 4, 5, 6, 7]
        assert await read_all_json(streams, name, 0, 3) == [1, 2, 3, 4, 5, 6, 7]

    async def test_close_when_closed_then_appends_refused_and_close_again_is_a_duplicate(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-close")
        await streams.create(spec(name), messages(1, 1))
        closed = await append(streams, name, messages(2, 1), close=True)
        assert (closed.last_seq, closed.closed, closed.duplicate) == (2, True, False)
        again = await append(streams, name, [], close=True)
        assert (again.last_seq, again.closed, again.duplicate) == (2, True, True)
        with pytest.raises(StreamClosed) as caught:
            await append(streams, name, messages(3, 1))
        assert caught.value.last_seq == 2
        assert await read_all(streams, name) == [1, 2]

    async def test_delete_when_no_forks_then_gone_and_name_starts_afresh(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-delete")
        await streams.create(spec(name), messages(1, 4))
        run_id = (await state_of(streams, name)).run_id
        await streams.delete(name)
        assert await streams.lookup(name, touch=True) is None
        assert await streams.log.find_run(run_id) is None
        with pytest.raises(StreamNotFound):
            await streams.delete(name)
        state, created = await streams.create(spec(name), messages(7, 1))
        assert created and state.last_seq == 1
        assert await read_all(streams, name) == [7]

    async def test_append_when_stream_deleted_meanwhile_then_not_found_and_nothing_stored(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-deleted-meanwhile")
        await streams.create(spec(name), [])
        state = await state_of(streams, name)
        await streams.delete(name)
        with pytest.raises(StreamNotFound):
            await streams.append_guarded(
                state, messages(1, 1), close=False, producer=None, stream_seq="a"
            )
        assert await streams.log.find_run(state.run_id) is None

    # -- fork -------------------------------------------------------------------------

    async def test_fork_when_made_then_prefix_shared_and_both_go_on_apart(
        self, streams: StreamStore
    ) -> None:
        source, fork, grandchild = new_name("s-src"), new_name("s-fork"), new_name("s-gc")
        await streams.create(spec(source), messages(1, 5))
        state = await forked(streams, fork, source, 3)
        assert (state.last_seq, state.fork_seq) == (3, 3)
        await append(streams, fork, messages(40, 2))
        await append(streams, source, messages(6, 1))
        assert await read_all(streams, fork) == [1, 2, 3, 40, 41]
        assert await read_all(streams, source) == [1, 2, 3, 4, 5, 6]
        await forked(streams, grandchild, fork, 4)
        await append(streams, grandchild, messages(500, 1))
        for after in range(6):
            assert await read_all(streams, grandchild, after, 2) == [1, 2, 3, 40, 500][after:]
            assert await read_all_json(streams, grandchild, after, 2) == [1, 2, 3, 40, 500][after:]
        assert (await state_of(streams, source)).forked
        # A fork of the fork inside its inherited prefix: the source's events up to there.
        inner = new_name("s-inner")
        await forked(streams, inner, fork, 2)
        await append(streams, inner, messages(700, 2))
        for after in range(4):
            assert await read_all(streams, inner, after, 2) == [1, 2, 700, 701][after:]
            assert await read_all_json(streams, inner, after, 2) == [1, 2, 700, 701][after:]

    async def test_delete_when_forks_read_the_source_then_soft_deleted_until_the_last_goes(
        self, streams: StreamStore
    ) -> None:
        source, fork = new_name("s-soft"), new_name("s-soft-fork")
        await streams.create(spec(source), messages(1, 4))
        source_run = (await state_of(streams, source)).run_id
        await forked(streams, fork, source, 2)
        await streams.delete(source)
        with pytest.raises(StreamGone):
            await streams.lookup(source, touch=True)
        with pytest.raises(StreamGone):
            await streams.delete(source)
        with pytest.raises(StreamConflict):
            await streams.create(spec(source), [])
        # The fork still reads the deleted source's prefix, from any offset.
        await append(streams, fork, messages(30, 1))
        for after in range(4):
            assert await read_all(streams, fork, after, 1) == [1, 2, 30][after:]
        await streams.delete(fork)
        assert await streams.lookup(source, touch=True) is None
        assert await streams.log.find_run(source_run) is None
        _, created = await streams.create(spec(source), [])
        assert created

    # -- idempotent producers -------------------------------------------------------

    async def test_producer_when_seq_retried_then_duplicate_stored_once(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-prod")
        await streams.create(spec(name), [])
        p0, p1 = Producer("p", 0, 0), Producer("p", 0, 1)
        first = await append(streams, name, messages(1, 2), producer=p0)
        retry = await append(streams, name, messages(1, 2), producer=p0)
        second = await append(streams, name, messages(3, 1), producer=p1)
        retry_older = await append(streams, name, messages(1, 2), producer=p0)
        assert (first.duplicate, first.last_seq, first.producer_seq) == (False, 2, 0)
        assert (retry.duplicate, retry.last_seq, retry.producer_seq) == (True, 2, 0)
        assert (second.duplicate, second.last_seq) == (False, 3)
        assert (retry_older.duplicate, retry_older.producer_seq) == (True, 1)
        assert await read_all(streams, name) == [1, 2, 3]

    async def test_producer_when_seq_skips_ahead_then_gap_names_expected_and_received(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-gap")
        await streams.create(spec(name), [])
        with pytest.raises(ProducerSeqGap) as first:
            await append(streams, name, messages(1, 1), producer=Producer("p", 0, 1))
        assert (first.value.expected, first.value.received) == (0, 1)
        await append(streams, name, messages(1, 1), producer=Producer("p", 0, 0))
        with pytest.raises(ProducerSeqGap) as caught:
            await append(streams, name, messages(2, 1), producer=Producer("p", 0, 5))
        assert (caught.value.expected, caught.value.received) == (1, 5)
        assert await read_all(streams, name) == [1]

    async def test_producer_when_epoch_changes_then_old_epoch_fenced_and_new_starts_at_zero(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-epoch")
        await streams.create(spec(name), [])
        await append(streams, name, messages(1, 1), producer=Producer("p", 1, 0))
        with pytest.raises(ProducerEpochSeq):
            await append(streams, name, messages(2, 1), producer=Producer("p", 2, 3))
        await append(streams, name, messages(2, 1), producer=Producer("p", 2, 0))
        with pytest.raises(ProducerFenced) as caught:
            await append(streams, name, messages(9, 1), producer=Producer("p", 1, 1))
        assert caught.value.epoch == 2
        # Another producer id keeps its own sequence.
        await append(streams, name, messages(3, 1), producer=Producer("q", 0, 0))
        assert await read_all(streams, name) == [1, 2, 3]

    async def test_producer_when_it_closed_the_stream_then_its_retry_is_a_duplicate(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-prod-close")
        await streams.create(spec(name), [])
        p = Producer("p", 0, 0)
        done = await append(streams, name, messages(1, 1), producer=p, close=True)
        retry = await append(streams, name, messages(1, 1), producer=p, close=True)
        assert (done.closed, done.duplicate, retry.closed, retry.duplicate) == (
            True,
            False,
            True,
            True,
        )
        with pytest.raises(StreamClosed):
            await append(streams, name, messages(2, 1), producer=Producer("other", 0, 0))
        assert await read_all(streams, name) == [1]

    async def test_producer_when_retries_race_from_two_handles_then_stored_once(
        self, streams: StreamStore, second_streams: StreamStore
    ) -> None:
        name = new_name("s-race")
        await streams.create(spec(name), [])

        async def send(store: StreamStore, seq: int) -> Any:
            return await append(store, name, messages(seq * 10, 3), producer=Producer("p", 0, seq))

        for seq in range(8):
            results = await asyncio.gather(
                *(send(streams if i % 2 else second_streams, seq) for i in range(4))
            )
            assert sorted(r.duplicate for r in results) == [False, True, True, True]
        assert await read_all(streams, name) == [seq * 10 + i for seq in range(8) for i in range(3)]

    # -- Stream-Seq ---------------------------------------------------------------

    async def test_stream_seq_when_not_after_the_last_then_conflict_and_nothing_stored(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-seq")
        await streams.create(spec(name), [])
        await append(streams, name, messages(1, 1), stream_seq="b")
        await append(streams, name, messages(2, 1), stream_seq="c")
        for stale in ("c", "b", "a"):
            with pytest.raises(StreamSeqConflict):
                await append(streams, name, messages(9, 1), stream_seq=stale)
        # Compared as bytes, not numbers: "10" sorts before "9".
        await append(streams, name, messages(3, 1), stream_seq="d9")
        with pytest.raises(StreamSeqConflict):
            await append(streams, name, messages(9, 1), stream_seq="d10")
        await append(streams, name, messages(4, 1))  # no Stream-Seq: not checked
        assert await read_all(streams, name) == [1, 2, 3, 4]

    # -- TTL and expiry ---------------------------------------------------------

    async def test_ttl_when_touched_then_expiry_slides_and_a_head_does_not_slide_it(
        self, streams: StreamStore, age: Age
    ) -> None:
        name = new_name("s-ttl")
        await streams.create(spec(name, ttl_seconds=60), messages(1, 1))
        await age(name, 50)
        assert await streams.lookup(name, touch=True) is not None  # read: slides
        await age(name, 50)
        assert await streams.lookup(name, touch=False) is not None  # head: does not
        await age(name, 15)
        assert await streams.lookup(name, touch=True) is None
        assert await streams.lookup(name, touch=False) is None

    async def test_expires_at_when_passed_then_not_found_even_if_touched(
        self, streams: StreamStore, age: Age
    ) -> None:
        name = new_name("s-at")
        at = datetime.now(UTC) + timedelta(seconds=30)
        await streams.create(spec(name, expires_at=at), messages(1, 1))
        assert await streams.lookup(name, touch=True) is not None
        await age(name, 31)
        assert await streams.lookup(name, touch=True) is None

    async def test_create_when_name_expired_then_replaced_unless_forks_read_it(
        self, streams: StreamStore, age: Age
    ) -> None:
        plain, read, fork = new_name("s-exp"), new_name("s-exp-read"), new_name("s-exp-fork")
        await streams.create(spec(plain, ttl_seconds=10), messages(1, 3))
        await streams.create(spec(read, ttl_seconds=10), messages(1, 3))
        await forked(streams, fork, read, 2)
        await age(plain, 11)
        await age(read, 11)
        state, created = await streams.create(spec(plain), messages(8, 1))
        assert created and state.last_seq == 1
        assert await read_all(streams, plain) == [8]
        with pytest.raises(StreamConflict):
            await streams.create(spec(read), [])
        assert await read_all(streams, fork) == [1, 2]

    # -- the sweep ------------------------------------------------------------------

    async def test_sweep_when_streams_expired_then_deleted_whole_and_live_ones_untouched(
        self, streams: StreamStore, age: Age
    ) -> None:
        expired = [new_name("s-sweep-x") for _ in range(5)]
        live = [new_name("s-sweep-live") for _ in range(3)]
        for i, name in enumerate(expired):
            await streams.create(spec(name, ttl_seconds=5), messages(1, 3 + i))
            await append(streams, name, messages(100, 1), producer=Producer("p", 0, 0))
        await streams.create(spec(live[0]), messages(1, 2))
        await streams.create(spec(live[1], ttl_seconds=3600), messages(1, 2))
        at = datetime.now(UTC) + timedelta(hours=1)
        await streams.create(spec(live[2], expires_at=at), messages(1, 2))
        runs = [(await state_of(streams, name)).run_id for name in expired]
        for name in expired:
            await age(name, 6)
        for name in live:
            await age(name, 6)
        report = await streams.sweep_expired(batch_events=8)
        assert report.streams >= len(expired) and report.failed == 0
        for run_id in runs:
            assert await streams.log.find_run(run_id) is None
        for name in live:
            assert await read_all(streams, name) == [1, 2]
        # Gone for good: the name is free, with nothing of the old stream.
        state, created = await streams.create(spec(expired[0]), [])
        assert created and state.last_seq == 0
        again = await append(streams, expired[0], messages(1, 1), producer=Producer("p", 0, 0))
        assert not again.duplicate

    async def test_sweep_when_expired_source_has_forks_then_kept_until_they_are_gone(
        self, streams: StreamStore, age: Age
    ) -> None:
        source, fork = new_name("s-sweep-src"), new_name("s-sweep-fork")
        await streams.create(spec(source, ttl_seconds=5), messages(1, 4))
        source_run = (await state_of(streams, source)).run_id
        await forked(streams, fork, source, 3, ttl_seconds=5)
        await append(streams, fork, messages(20, 1))
        await age(source, 6)
        await streams.sweep_expired()
        assert await streams.lookup(source, touch=False) is None  # expired: 404
        assert await streams.log.find_run(source_run) is not None  # kept for the fork
        assert await read_all(streams, fork) == [1, 2, 3, 20]
        fork_run = (await state_of(streams, fork)).run_id
        await age(fork, 6)
        await streams.sweep_expired()
        assert await streams.log.find_run(fork_run) is None
        assert await streams.log.find_run(source_run) is None

    async def test_sweep_when_a_live_fork_reads_an_expired_source_then_fork_reads_all(
        self, streams: StreamStore, age: Age
    ) -> None:
        source, fork = new_name("s-live-src"), new_name("s-live-fork")
        await streams.create(spec(source, ttl_seconds=5), messages(1, 3))
        await forked(streams, fork, source, 3)
        await age(source, 6)
        for _ in range(2):
            await streams.sweep_expired()
        for after in range(3):
            assert await read_all_json(streams, fork, after, 1) == [1, 2, 3][after:]
        await streams.delete(fork)
        await streams.sweep_expired()
        with pytest.raises(RunNotFound):
            await streams.log.get_run(run_id_for(source))

    async def test_sweep_when_counted_first_then_the_count_deletes_nothing(
        self, streams: StreamStore, age: Age
    ) -> None:
        expired, live = new_name("s-count-x"), new_name("s-count-live")
        await streams.create(spec(expired, ttl_seconds=5), messages(1, 3))
        await streams.create(spec(live, ttl_seconds=3600), messages(1, 2))
        await age(expired, 6)
        counted = await streams.count_sweepable()
        assert counted.streams >= 1 and counted.events >= 3
        assert await streams.log.find_run(run_id_for(expired)) is not None
        report = await streams.sweep_expired()
        assert report.streams >= 1 and report.events >= 3
        assert await streams.log.find_run(run_id_for(expired)) is None
        assert await read_all(streams, live) == [1, 2]

    # -- reads from any offset, exactly once -------------------------------------

    async def test_reads_when_from_every_offset_and_page_size_then_each_message_once(
        self, streams: StreamStore
    ) -> None:
        name = new_name("s-offsets")
        await streams.create(spec(name), messages(1, 4))
        for start in range(5, 21, 4):
            await append(streams, name, messages(start, 4))
        for after in range(21):
            for limit in (1, 3, 20):
                assert await read_all(streams, name, after, limit) == list(range(after + 1, 21))
                assert await read_all_json(streams, name, after, limit) == list(
                    range(after + 1, 21)
                )

    @settings(
        max_examples=40,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(
        steps=st.lists(
            st.one_of(
                st.tuples(st.just("append"), st.integers(1, 6)),
                st.tuples(st.just("produce"), st.integers(1, 4)),
                st.tuples(st.just("retry"), st.integers(0, 3)),
                st.tuples(st.just("read"), st.integers(0, 40)),
                st.tuples(st.just("fork"), st.integers(0, 40)),
            ),
            min_size=1,
            max_size=25,
        ),
        limit=st.integers(1, 8),
    )
    async def test_property_random_appends_retries_forks_and_reads_then_every_message_once(
        self, streams: StreamStore, steps: list[tuple[str, int]], limit: int
    ) -> None:
        """A model (a list) says what the stream holds; every read from any offset,
        paged at any size, plain or JSON, of the stream or of a fork, equals its slice."""
        name = new_name("s-prop")
        await streams.create(spec(name), [])
        model: list[int] = []
        sent: list[tuple[int, list[int]]] = []  # producer seq -> what it carried
        forks: list[tuple[str, list[int]]] = []
        n = 0
        for action, arg in steps:
            if action == "append":
                await append(streams, name, messages(n, arg))
                model += list(range(n, n + arg))
                n += arg
            elif action == "produce":
                seq = len(sent)
                await append(streams, name, messages(n, arg), producer=Producer("p", 0, seq))
                sent.append((seq, list(range(n, n + arg))))
                model += list(range(n, n + arg))
                n += arg
            elif action == "retry" and sent:
                seq, carried = sent[min(arg, len(sent) - 1)]
                again = await append(
                    streams,
                    name,
                    messages(carried[0], len(carried)),
                    producer=Producer("p", 0, seq),
                )
                assert again.duplicate
            elif action == "read":
                after = min(arg, len(model))
                assert await read_all(streams, name, after, limit) == model[after:]
                assert await read_all_json(streams, name, after, limit) == model[after:]
            elif action == "fork":
                at = min(arg, len(model))
                fork = new_name("s-prop-fork")
                await forked(streams, fork, name, at)
                await append(streams, fork, messages(10_000 + at, 1))
                forks.append((fork, [*model[:at], 10_000 + at]))
        assert await read_all(streams, name, 0, limit) == model
        for fork, content in forks:
            for after in range(len(content) + 1):
                assert await read_all(streams, fork, after, limit) == content[after:]
        assert (await state_of(streams, name)).last_seq == len(model)
