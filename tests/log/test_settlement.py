"""Settling a group commit's outcomes: pure functions, no PostgreSQL."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from agent_replay.errors import ProducerRefused, RunClosed, RunNotFound, SeqConflict
from agent_replay.log import request, sql
from agent_replay.log.chunks import stored
from agent_replay.log.request import (
    EventRows,
    Group,
    Pending,
    RunShare,
    explain,
    ones_columns,
    ones_columns_python,
    ones_python,
    settle,
    settle_loop_python,
    take_python,
)
from agent_replay.log.summary import SUMMARIZED, summarize
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


def test_group_loops_when_the_service_is_installed_then_they_are_built_in_c() -> None:
    """`pip install` (ops/setup) compiles `_group.c`; without it the suite would test only
    the Python twins, and every commit lane would run them."""
    assert request.GROUP_IN_C


@given(groups)
def test_settle_loop_when_any_group_then_c_and_python_give_the_same(
    spec: dict[str, tuple[list[int], bool, int | None]],
) -> None:
    loop = asyncio.new_event_loop()
    try:
        appends, bases = _group_of(loop, spec)
        from_c = request._settle_loop(appends, bases, AppendResult)
        from_python = settle_loop_python(appends, bases, AppendResult)
    finally:
        loop.close()
    assert from_c == from_python
    # The same objects in the same places, each result an AppendResult.
    assert [(id(item), type(result)) for item, result in from_c[1]] == [
        (id(item), AppendResult) for item, _ in from_python[1]
    ]
    assert {run: list(map(id, items)) for run, items in from_c[3].items()} == {
        run: list(map(id, items)) for run, items in from_python[3].items()
    }


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


@given(_queued, st.sets(st.sampled_from(["r1", "r2", "r3"])), st.integers(1, 8))
def test_take_when_any_queue_then_c_and_python_take_the_same_in_order(
    queued: list[tuple[str, int, bool, bool, int | None, bool, bool]],
    blocked: set[str],
    max_events: int,
) -> None:
    """A lane's take in C and its Python twin: the same appends by run in the same order,
    the same left queued, the same runs blocked after; every append still waited on is
    taken or left, each run's in the order queued."""
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
        answers = []
        for take in (request.take, take_python):
            runs = set(blocked)
            group, kept, kept_size = take(deque(items), runs, max_events)
            taken = {run: [items.index(item) for item in its] for run, its in group.items()}
            answers.append(
                (list(taken.items()), [items.index(item) for item in kept], kept_size, runs)
            )
    finally:
        loop.close()
    assert answers[0] == answers[1]
    taken_items, kept, kept_size, _ = answers[1]
    waiting = [i for i, item in enumerate(items) if not item.future.done()]
    assert sorted([i for _, its in taken_items for i in its] + kept) == waiting
    assert kept_size == sum(len(items[i].chunks) for i in kept)
    assert all(its == sorted(its) for _, its in taken_items) and kept == sorted(kept)
    assert not {run for run, _ in taken_items} & blocked


# Any id or type, the columns' separator and null among them.
_COLUMN_TEXT = st.text(st.sampled_from(["\x1e", "\x1f", "a", "é", "🙂", '"']), max_size=3)


@given(
    st.lists(
        st.tuples(
            _COLUMN_TEXT,
            _COLUMN_TEXT,
            st.one_of(st.none(), _COLUMN_TEXT),
            st.one_of(st.none(), _COLUMN_TEXT),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_ones_columns_when_any_values_then_c_and_python_give_the_same(
    values: list[tuple[str, str, str | None, str | None]],
) -> None:
    """The columns of any rows, or None for both where a value holds a separator (or an
    id the null); each column, split, gives back its values, the nulls marked."""
    rows = [
        (f"run-{i}", 1, kind, f'{{"t":{i}}}', message_id, tool_call_id, 1)
        for i, (kind, _, message_id, tool_call_id) in enumerate(values)
    ]
    columns = ones_columns(rows)
    assert columns == ones_columns_python(rows)
    if columns is None:
        assert any(
            "\x1e" in kind or any(v is not None and ("\x1e" in v or "\x1f" in v) for v in ids)
            for _, _, kind, _, *ids, _ in rows
        )
        return
    for column, field in zip(columns, (0, 2, 3, 4, 5), strict=True):
        assert column.split("\x1e") == [
            "\x1f" if row[field] is None else row[field] for row in rows
        ]


def test_ones_columns_when_a_type_or_run_is_null_then_both_refuse_alike() -> None:
    row = ("run-1", 1, None, "{}", None, None, 1)
    for columns in (ones_columns, ones_columns_python):
        with pytest.raises(TypeError):
            columns([row])


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
    shares, _ = Group.of({"r": [item]}).share_params()
    assert json.loads(shares)["r"]["born"] == "2026-12-01T15:00:00.123456+00:00"


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
    shares, _ = Group.of({"r": [item]}).share_params()
    assert json.loads(shares)["r"]["producer"] == ["p-1", 2, 7]
    assert item.ends_group


def test_group_when_built_then_shares_and_columns_are_the_statements_parameters(
    loop: asyncio.AbstractEventLoop,
) -> None:
    finished = {"type": "RUN_FINISHED", "usage": {"totalTokens": 5}}
    appends = {
        "a": [pending(loop, "a", 2, expected=3), pending(loop, "a", 1, first=finished)],
        "b": [pending(loop, "b", 0, close=True)],
    }
    appends["b"][0].close_status = "cancelled"
    group = Group.of(appends)
    shares, run_ids = group.share_params()
    assert run_ids == ["a", "b"]
    assert json.loads(shares) == {
        "a": {"n": 3, "expected": 3, "terminal": "RUN_FINISHED", "total_tokens": 5},
        "b": {"n": 0, "close": True, "status": "cancelled"},
    }
    columns = list(zip(*group.events.rows, strict=True))
    assert columns[0] == ("a", "a", "a") and columns[1] == (1, 2, 3)
    assert columns[2] == ("A", "A", "RUN_FINISHED")
    month = date(2026, 12, 1)
    assert group.events.records({"a": 10}, {"a": month}) == [
        ("a", 11, "A", '{"type":"A","i":0}', None, None, 1, month),
        ("a", 12, "A", '{"type":"A","i":1}', None, None, 1, month),
        (
            "a",
            13,
            "RUN_FINISHED",
            json.dumps(finished, separators=(",", ":")),
            None,
            None,
            1,
            month,
        ),
    ]


def test_run_share_when_error_without_terminal_then_error_not_sent() -> None:
    share = RunShare(count=1, error="stale", tools=("t",), usage=(1, None, None))
    assert share.to_json() == {"n": 1, "tools": ["t"], "prompt_tokens": 1}


_SHARE_ITEM = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["A", "RUN_FINISHED", "RUN_ERROR", "TOOL_CALL_START"]),
        "count": st.integers(0, 2),
        "expected": st.sampled_from([None, 1]),
        "close": st.booleans(),
        "born": st.booleans(),
        "producer": st.booleans(),
    }
)


@given(st.lists(_SHARE_ITEM, min_size=1, max_size=3))
def test_group_when_every_share_says_its_count_and_expected_seq_only_then_plain_params(
    drawn: list[dict[str, Any]],
) -> None:
    """The plain statement is chosen exactly when the full one's request for the run
    would be its count and at most its expected seq, and then it gets those; the tools
    statement when it would be those and the tools called, and then it gets those too.
    (Expected seq, run life and producer are a share's first append's.)"""
    loop = asyncio.new_event_loop()
    try:
        items = []
        for index, spec in enumerate(drawn):
            chunk = {"type": spec["kind"], "toolCallName": "t", "usage": {"totalTokens": 1}}
            item = pending(loop, "r", spec["count"], first=chunk, close=spec["close"])
            if index == 0:
                item.expected_seq = spec["expected"]
                item.created_at = datetime(2026, 12, 3, tzinfo=UTC) if spec["born"] else None
                item.producer = ("p", 0, 0) if spec["producer"] else None
            items.append(item)
        group = Group.of({"r": items})
        full = json.loads(group.share_params()[0])["r"]
        statement, params = group.request_params()
        assert params[1] == ["r"]
        if full.keys() <= {"n", "expected", "tools"}:
            counts, _, expected, *tools = params
            assert json.loads(counts) == {"r": full["n"]}
            assert json.loads(expected) == ({"r": full["expected"]} if "expected" in full else {})
            if "tools" in full:
                assert statement == sql.APPEND_TOOLS
                assert [json.loads(t) for t in tools] == [{"r": full["tools"]}]
            else:
                assert statement == sql.APPEND_PLAIN and not tools
        else:
            assert statement == sql.APPEND and json.loads(params[0]) == {"r": full}
            assert params[2:] == ("{}", [], "{}")  # no plain share beside it
    finally:
        loop.close()


@given(
    st.dictionaries(
        st.sampled_from(["r1", "r2", "r3", "r4"]),
        st.tuples(
            st.sampled_from(["A", "RUN_FINISHED", "TOOL_CALL_START"]), st.sampled_from([None, 3])
        ),
        min_size=1,
    )
)
def test_group_when_some_shares_are_plain_then_only_the_others_take_full_requests(
    drawn: dict[str, tuple[str, int | None]],
) -> None:
    """`append` updates the plain shares' runs as `append_plain` does: they go in its
    $5-$7, the others' full requests in its $3-$4, each run in exactly one of them. A
    group whose other shares only called tools takes `append_tools` instead: every run
    in its $3-$5, as `append_plain`'s, and the tools apart in $6."""
    loop = asyncio.new_event_loop()
    try:
        appends = {}
        for run, (kind, expected) in drawn.items():
            first = {"type": kind, "toolCallName": "t"}
            appends[run] = [pending(loop, run, 2, expected=expected, first=first)]
        group = Group.of(appends)
        statement, params = group.request_params()
        kinds = {kind for kind, _ in drawn.values()}
        called = {run for run, (kind, _) in drawn.items() if kind == "TOOL_CALL_START"}
        if "RUN_FINISHED" in kinds:
            assert statement == sql.APPEND
            simple = {run for run, (kind, _) in drawn.items() if kind == "A"}
            rich = json.loads(params[0])
            assert set(params[1]) == set(rich) == set(drawn) - simple
            assert all(rich[run] == group.shares[run].to_json() for run in rich)
            tail = params[2:]
        elif called:
            assert statement == sql.APPEND_TOOLS
            assert json.loads(params[3]) == {run: ["t"] for run in called}
            simple, tail = set(drawn), params[:3]
        else:
            assert statement == sql.APPEND_PLAIN
            simple, tail = set(drawn), params
        counts, plain_runs, expected_seqs = tail
        assert set(plain_runs) == simple and json.loads(counts) == dict.fromkeys(simple, 2)
        assert json.loads(expected_seqs) == {
            run: drawn[run][1] for run in simple if drawn[run][1] is not None
        }
    finally:
        loop.close()


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
        # The statement is chosen from the general way's shares alone: the one, with the
        # same parameters, that looking at every share picks.
        assert group.request_params() == Group(shares, events, list(shares)).request_params()
    finally:
        loop.close()


@given(st.dictionaries(st.sampled_from(["r1", "r2", "r3", "r4", "r5"]), _appends, min_size=1))
def test_ones_when_any_group_then_c_and_python_make_the_same_rows_shares_and_rest(
    drawn: dict[str, list[tuple[list[str], bool, int | None, bool, bool]]],
) -> None:
    """`Group.of`'s loop in C and its Python twin: the same rows, the very same share for
    each lone token, and `rest` called for the same runs, in order."""
    loop = asyncio.new_event_loop()
    one = RunShare(1)
    try:
        appends = {
            run: [
                Pending(
                    run, [stored({"type": kind, "messageId": f"m{i}"}, i)
                          for i, kind in enumerate(kinds)],
                    expected, close, True, None, loop.create_future(),
                    _LIVES[0] if life else None, ("p", 0, 0) if producer else None,
                )
                for kinds, close, expected, life, producer in specs
            ]
            for run, specs in drawn.items()
        }  # fmt: skip
        answers = []
        for ones in (request._ones, ones_python):
            rows: list[Any] = []
            shares: dict[str, RunShare] = {}
            rested: list[tuple[str, int]] = []

            def rest(run: str, items: list[Pending]) -> None:
                rested.append((run, id(items)))  # noqa: B023 (called before the next ones)
                rows.append(run)  # noqa: B023

            made = ones(appends, rows, shares, one, SUMMARIZED, rest)
            answers.append((made, rows, {run: id(share) for run, share in shares.items()}, rested))
    finally:
        loop.close()
    assert answers[0] == answers[1]
    made, rows, shares, rested = answers[1]
    assert made == len(shares) == len(appends) - len(rested)
    assert set(shares.values()) <= {id(one)}
