"""Settling a group commit's outcomes: pure functions, no PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent_replay.errors import ProducerRefused, RunClosed, RunNotFound, SeqConflict
from agent_replay.log.chunks import stored
from agent_replay.log.request import (
    EventRows,
    Group,
    Pending,
    RunShare,
    explain,
    ones_columns,
    settle,
    take,
)
from agent_replay.log.summary import summarize
from agent_replay.log.values import AppendResult, RunState


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def pending(
    loop: asyncio.AbstractEventLoop,
    run_id: str,
    count: int,
    *,
    expected: int | None = None,
    close: bool = False,
    create: bool = True,
    first: dict[str, object] | None = None,
) -> Pending:
    chunks = [stored(first or {"type": "A", "i": i}, i) for i in range(count)]
    return Pending(run_id, chunks, expected, close, create, None, loop.create_future())


# A group: per run, the chunk counts of its appends (the last may close), and
# whether the statement applied the run (at which base seq).
groups = st.dictionaries(
    st.sampled_from(["r1", "r2", "r3", "r4"]),
    st.tuples(
        st.lists(st.integers(0, 5), min_size=1, max_size=4),
        st.booleans(),
        st.one_of(st.none(), st.integers(0, 2**40)),
    ),
    min_size=1,
)


def _group_of(
    loop: asyncio.AbstractEventLoop, spec: dict[str, tuple[list[int], bool, int | None]]
) -> tuple[dict[str, list[Pending]], dict[str, int]]:
    """The appends of a `groups` example, and the bases of the runs the statement applied."""
    appends = {
        run: [pending(loop, run, n, close=close and i == len(counts) - 1)
              for i, n in enumerate(counts)]
        for run, (counts, close, _) in spec.items()
    }  # fmt: skip
    return appends, {run: base for run, (_, _, base) in spec.items() if base is not None}


@given(groups)
def test_settle_when_statement_applied_some_runs_then_each_append_gets_its_contiguous_block(
    spec: dict[str, tuple[list[int], bool, int | None]],
) -> None:
    loop = asyncio.new_event_loop()
    try:
        appends, bases = _group_of(loop, spec)
        outcomes, refused = settle(appends, bases)
    finally:
        loop.close()
    assert set(refused) == set(spec) - set(bases)
    assert outcomes.errors == [] and outcomes.retry == [] and outcomes.create == {}
    results = {id(item): result for item, result in outcomes.results}
    for run, base in bases.items():
        counts, close, _ = spec[run]
        seq = base
        for item, n in zip(appends[run], counts, strict=True):
            result = results[id(item)]
            assert result == AppendResult(run, seq + 1 if n else None, seq + n)
            seq += n
        assert (run, seq, close) in outcomes.hints
    assert outcomes.committed == sum(sum(spec[run][0]) for run in bases)
    assert len(outcomes.hints) == len(bases)


# A queue of appends, each (run, chunks, expected seq given, producer given, run life
# (none, one or another), close, withdrawn by its producer).
_queued = st.lists(
    st.tuples(
        st.sampled_from(["r1", "r2", "r3"]),
        st.integers(0, 4),
        st.booleans(),
        st.booleans(),
        st.sampled_from([None, 0, 1]),
        st.booleans(),
        st.booleans(),
    ),
    max_size=12,
)
_LIVES = [datetime(2026, 12, 6, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC)]


_TOKEN = ("r1", 1, False, False, None, False, False)


@given(_queued, st.sets(st.sampled_from(["r1", "r2", "r3"])), st.integers(1, 8))
# Each rule by itself, which the draws above reach rarely: a later append of a run that
# states its expected seq, its producer, another run life; one after a close; one past
# the bound; one of a run held by another lane.
@example([_TOKEN, ("r1", 1, True, False, None, False, False)], set(), 8)
@example([_TOKEN, ("r1", 1, False, True, None, False, False)], set(), 8)
@example([_TOKEN, ("r1", 1, False, False, 1, False, False)], set(), 8)
@example([("r1", 1, False, False, None, True, False), _TOKEN], set(), 8)
@example(
    [
        _TOKEN,
        ("r2", 2, False, False, None, False, False),
        ("r3", 1, False, False, None, False, False),
    ],
    set(),
    2,
)
@example([_TOKEN, ("r2", 1, False, False, None, False, False)], {"r1"}, 8)
def test_take_when_any_queue_then_a_group_that_keeps_each_runs_order_and_bounds(
    queued: list[tuple[str, int, bool, bool, int | None, bool, bool]],
    blocked: set[str],
    max_events: int,
) -> None:
    """A lane's take: every append still waited on is taken or left, each run's in the
    order queued, and none of a run another lane holds; a withdrawn one is neither. A run's
    appends are taken up to the first that must wait, and from there all wait: one that
    would take the group past `max_events` (unless the group is empty), one that states
    its own expected seq, producer or another run life than the share it would join,
    and any after an append that ends its run's share (expected seq, close, producer)."""
    loop = asyncio.new_event_loop()
    try:
        items = []
        for run, n, expected, producer, life, close, withdrawn in queued:
            future = loop.create_future()
            if withdrawn:
                future.cancel()
            items.append(
                Pending(
                    run, [stored({"type": "A"}, 0)] * n, 1 if expected else None, close, True,
                    None, future, None if life is None else _LIVES[life],
                    ("p", 0, 0) if producer else None,
                )
            )  # fmt: skip
        runs = set(blocked)
        group, kept, kept_size = take(deque(items), runs, max_events)
    finally:
        loop.close()
    taken = [item for its in group.values() for item in its]
    waiting = [item for item in items if not item.future.done()]
    assert sorted(map(items.index, taken + kept)) == list(map(items.index, waiting))
    assert kept_size == sum(len(item.chunks) for item in kept)
    assert list(map(items.index, kept)) == sorted(map(items.index, kept))
    assert not set(group) & blocked and runs >= blocked | {item.run_id for item in kept}
    size, held = 0, set(blocked)
    for item in waiting:  # the oracle: the rules above, applied in queue order
        share = group.get(item.run_id, [])
        joined = [i for i in share if items.index(i) < items.index(item)]
        fits = (
            item.run_id not in held
            and (not size or size + len(item.chunks) <= max_events)
            and (
                not joined
                or (
                    item.expected_seq is None
                    and item.producer is None
                    and item.created_at == joined[0].created_at
                    and not joined[-1].ends_group
                )
            )
        )
        assert (item in share) == fits
        if fits:
            size += len(item.chunks)
        else:
            held.add(item.run_id)
    assert size == sum(len(item.chunks) for item in taken)


# Any id or type, the columns' separator and null among them.
_COLUMN_TEXT = st.text(st.sampled_from(["\x1e", "\x1f", "a", "é", "🙂", '"']), max_size=3)


@given(
    st.lists(
        st.tuples(
            _COLUMN_TEXT,
            st.one_of(st.none(), _COLUMN_TEXT),
            st.one_of(st.none(), _COLUMN_TEXT),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_ones_columns_when_any_values_then_each_splits_back_or_none_where_a_value_holds_one(
    values: list[tuple[str, str | None, str | None]],
) -> None:
    """`append_ones`' columns of any rows: each column, split as the statement splits it,
    gives back its values, the nulls marked; None exactly where a type holds the
    separator or an id holds the separator or the null."""
    rows = [
        (f"run-{i}", 1, kind, f'{{"t":{i}}}', message_id, tool_call_id, 1)
        for i, (kind, message_id, tool_call_id) in enumerate(values)
    ]
    columns = ones_columns(rows)
    clash = any(
        "\x1e" in kind or any(v is not None and ("\x1e" in v or "\x1f" in v) for v in ids)
        for kind, *ids in values
    )
    assert (columns is None) == clash
    if columns is None:
        return
    for column, field in zip(columns, (0, 2, 3, 4, 5), strict=True):
        assert column.split("\x1e") == [
            "\x1f" if row[field] is None else row[field] for row in rows
        ]


def test_explain_when_run_missing_and_all_may_create_then_created_with_thread_and_retried(
    loop: asyncio.AbstractEventLoop,
) -> None:
    started = {"type": "RUN_STARTED", "threadId": "t-\u0000"}
    items = [pending(loop, "r", 1, first=started), pending(loop, "r", 2)]
    outcomes = explain({"r": items}, {})
    assert outcomes.create == {"r": "t-\ufffd"} and outcomes.retry == items
    assert outcomes.results == [] and outcomes.errors == []


def test_explain_when_run_missing_and_one_append_may_not_create_then_all_run_not_found(
    loop: asyncio.AbstractEventLoop,
) -> None:
    items = [pending(loop, "r", 1), pending(loop, "r", 1, create=False)]
    outcomes = explain({"r": items}, {})
    assert [(item, type(e)) for item, e in outcomes.errors] == [
        (items[0], RunNotFound),
        (items[1], RunNotFound),
    ]
    assert outcomes.create == {} and outcomes.retry == []


@pytest.mark.parametrize(
    ("closed", "stored_already", "outcome"),
    [
        (False, True, AppendResult("r", 4, 5)),
        (True, True, AppendResult("r", 4, 5)),
        (False, False, SeqConflict),
        (True, False, RunClosed),
    ],
)
def test_explain_when_expected_seq_refused_then_retry_answered_else_conflict_or_closed(
    loop: asyncio.AbstractEventLoop, closed: bool, stored_already: bool, outcome: object
) -> None:
    head = pending(loop, "r", 2, expected=4)
    outcomes = explain({"r": [head]}, {"r": RunState(7, closed)}, ["r"] if stored_already else [])
    if isinstance(outcome, AppendResult):
        assert outcomes.results == [(head, outcome)] and outcomes.errors == []
    else:
        [(item, error)] = outcomes.errors
        assert item is head and type(error) is outcome and error.extra["last_seq"] == 7


def test_explain_when_run_closed_then_bare_close_is_a_no_op_and_chunks_are_refused(
    loop: asyncio.AbstractEventLoop,
) -> None:
    more, bare = pending(loop, "r", 1), pending(loop, "r", 0, close=True)
    outcomes = explain({"r": [more, bare]}, {"r": RunState(3, True)})
    assert outcomes.results == [(bare, AppendResult("r", None, 3))]
    assert [(item, type(e)) for item, e in outcomes.errors] == [(more, RunClosed)]


def test_explain_when_run_open_and_no_expectation_then_retried_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    items = [pending(loop, "r", 1), pending(loop, "r", 2)]
    outcomes = explain({"r": items}, {"r": RunState(0, False)})
    assert outcomes.retry == items and outcomes.results == outcomes.errors == []


def test_explain_when_run_made_again_since_the_append_saw_it_then_run_not_found_not_retried(
    loop: asyncio.AbstractEventLoop,
) -> None:
    seen = datetime(2026, 12, 1, 15, 0, tzinfo=UTC)
    items = [pending(loop, "r", 1), pending(loop, "r", 2)]
    for item in items:
        item.created_at = seen
    remade = explain({"r": items}, {"r": RunState(0, False, seen + timedelta(microseconds=1))})
    same = explain({"r": items}, {"r": RunState(0, False, seen)})
    assert [(item, type(e)) for item, e in remade.errors] == [(i, RunNotFound) for i in items]
    assert remade.retry == remade.results == []
    assert same.retry == items  # the same life, refused by a race: tried again


def test_group_when_append_names_the_runs_life_then_its_share_carries_it(
    loop: asyncio.AbstractEventLoop,
) -> None:
    item = pending(loop, "r", 1)
    item.created_at = datetime(2026, 12, 1, 15, 0, 0, 123456, tzinfo=UTC)
    share = Group.of({"r": [item]}).shares["r"].to_json()
    assert share["born"] == "2026-12-01T15:00:00.123456+00:00"


def test_explain_when_producer_append_refused_then_producer_refused_whatever_the_run(
    loop: asyncio.AbstractEventLoop,
) -> None:
    states = {"open": RunState(4, False), "closed": RunState(4, True)}
    for run in ("open", "closed", "missing"):
        item = pending(loop, run, 1)
        item.producer = ("p", 0, 3)
        outcomes = explain({run: [item]}, states)
        assert [(i, type(e)) for i, e in outcomes.errors] == [(item, ProducerRefused)], run
        assert outcomes.retry == outcomes.results == [] and outcomes.create == {}


def test_group_when_append_is_a_producers_then_its_share_carries_it_and_ends_the_run(
    loop: asyncio.AbstractEventLoop,
) -> None:
    item = pending(loop, "r", 1)
    item.producer = ("p-1", 2, 7)
    assert Group.of({"r": [item]}).shares["r"].to_json()["producer"] == ["p-1", 2, 7]
    assert item.ends_group


def test_group_when_built_then_each_runs_share_and_rows_say_what_its_appends_hold(
    loop: asyncio.AbstractEventLoop,
) -> None:
    finished = {"type": "RUN_FINISHED", "usage": {"totalTokens": 5}}
    appends = {
        "a": [pending(loop, "a", 2, expected=3), pending(loop, "a", 1, first=finished)],
        "b": [pending(loop, "b", 0, close=True)],
    }
    appends["b"][0].close_status = "cancelled"
    group = Group.of(appends)
    assert {run: share.to_json() for run, share in group.shares.items()} == {
        "a": {"n": 3, "expected": 3, "terminal": "RUN_FINISHED", "total_tokens": 5},
        "b": {"n": 0, "close": True, "status": "cancelled"},
    }
    columns = list(zip(*group.events.rows, strict=True))
    assert columns[0] == ("a", "a", "a") and columns[1] == (1, 2, 3)
    assert columns[2] == ("A", "A", "RUN_FINISHED")
    texts = [
        '{"type":"A","i":0}',
        '{"type":"A","i":1}',
        json.dumps(finished, separators=(",", ":")),
    ]
    assert columns[3] == tuple(texts)


def test_run_share_when_error_without_terminal_then_error_not_sent() -> None:
    share = RunShare(count=1, error="stale", tools=("t",), usage=(1, None, None))
    assert share.to_json() == {"n": 1, "tools": ["t"], "prompt_tokens": 1}


@given(
    st.lists(st.sampled_from(["A", "RUN_FINISHED", "RUN_ERROR", "TOOL_CALL_START"]), max_size=4),
    st.sampled_from([None, 7]),
    st.booleans(),
)
def test_run_share_when_made_of_chunks_then_it_carries_their_whole_summary(
    kinds: list[str], expected: int | None, close: bool
) -> None:
    """A share skips the summary when no chunk adds to it: what it carries is the same
    as the summary's, whichever chunks it holds."""
    chunks = [
        stored(
            {"type": kind, "toolCallName": f"t{i}", "message": "boom", "code": "E",
             "usage": {"promptTokens": 2, "completionTokens": 3, "totalTokens": 5}},
            i,
        )
        for i, kind in enumerate(kinds)
    ]  # fmt: skip
    summary = summarize(chunks)
    share = RunShare.of_chunks(chunks, expected=expected, close=close)
    ended = summary.terminal is not None
    assert (share.count, share.expected, share.close) == (len(kinds), expected, close)
    assert share.terminal == summary.terminal
    assert (share.error, share.error_code) == (
        (summary.error, summary.error_code) if ended else (None, None)
    )
    assert share.tools == tuple(summary.tools)
    assert share.usage == tuple(summary.usage)
    assert share.plain == (share.to_json().keys() <= {"n", "expected"})


# A share as the group is handed it: its appends, each (chunk types, close, expected
# seq, run life given, producer given).
_appends = st.lists(
    st.tuples(
        st.lists(st.sampled_from(["A", "TOOL_CALL_START", "RUN_FINISHED"]), max_size=3),
        st.booleans(),
        st.one_of(st.none(), st.integers(1, 9)),
        st.booleans(),
        st.booleans(),
    ),
    min_size=1,
    max_size=3,
)


# How a TOOL_CALL_START names its tool: the key, and a value that is a name, none, not
# a string, or one the summary must repair.
_tool_keys = st.tuples(
    st.sampled_from(["toolCallName", "toolName", "other"]),
    st.sampled_from(["t", "search", "", None, 7, "caf\u00e9", "a\x00b", "\ud83d"]),
)


@given(
    st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4", "r5"]), _appends, min_size=1),
    st.sampled_from([None, 2, 16]),
    _tool_keys,
)
# Each one-event path with an expected seq and without, which the draws above reach
# rarely: a token, and a tool call's start naming a tool or none.
@example(
    {
        "r1": [(["A"], False, 4, False, False)],
        "r2": [(["TOOL_CALL_START"], False, 3, False, False)],
        "r3": [(["TOOL_CALL_START"], False, None, False, False)],
    },
    None,
    ("toolCallName", "search"),
)
@example({"r1": [(["TOOL_CALL_START"], False, 2, False, False)]}, 16, ("toolName", "\ud83d"))
@example({"r1": [(["TOOL_CALL_START"], False, 2, False, False)]}, 2, ("toolCallName", 7))
def test_group_of_when_shares_are_one_event_then_same_rows_and_shares_as_the_general_path(
    drawn: dict[str, list[tuple[list[str], bool, int | None, bool, bool]]],
    batch_min: int | None,
    tool: tuple[str, object],
) -> None:
    """A share of one append with nothing to record, or of one tool call's start, and a
    row of one chunk, are made in a few steps of their own (`Group.of`,
    `RunShare.of`, `RunShare.called`, `EventRows.add`): the group's rows and shares are
    exactly what the general path makes of the same appends, and so is the statement it
    takes."""
    loop = asyncio.new_event_loop()
    try:
        born = datetime(2026, 12, 6, tzinfo=UTC)
        appends: dict[str, list[Pending]] = {}
        for run, specs in drawn.items():
            items = []
            for kinds, close, expected, life, producer in specs:
                chunks = [
                    stored(
                        {"type": kind, tool[0]: tool[1], "i": i, "messageId": f"m{i}",
                         "toolCallId": f"c{i}"},
                        i,
                    )
                    for i, kind in enumerate(kinds)
                ]  # fmt: skip
                items.append(
                    Pending(
                        run, chunks, expected, close, True, None, loop.create_future(),
                        born if life else None, ("p", 0, 0) if producer else None,
                    )
                )  # fmt: skip
            appends[run] = items
        group = Group.of(appends, batch_min)
        # The general path: chunks given as a tuple take no shortcut, and a share is
        # its appends' parts summarized, with the head's run life and producer.
        events = EventRows(batch_min=batch_min)
        shares = {}
        for run, items in appends.items():
            ord_ = 0
            for item in items:
                if item.chunks:
                    events.add(run, tuple(item.chunks), ord_)
                    ord_ += len(item.chunks)
            head, last = items[0], items[-1]
            share = RunShare.of_parts(
                [item.chunks for item in items],
                expected=head.expected_seq,
                close=last.close,
                status=last.close_status if last.close else None,
            )
            shares[run] = replace(share, born=head.created_at, producer=head.producer)
        assert group.events.rows == events.rows
        assert group.events.batched == events.batched and len(group.events) == len(events)
        assert group.shares == shares
        # And so the same statement, with the same parameters.
        assert group.statement() == Group(shares, events).statement()
    finally:
        loop.close()
