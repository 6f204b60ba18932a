"""Budgets as `REPLAY_AGENTS`, start bodies and `X-Budget` spell them, and the meter's count.

The meter's invariants are checked on generated event sequences against a count
written here from the documented rules, not against the meter's own answers.
"""

from __future__ import annotations

import itertools
import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.agents import load_catalog
from agent_replay.agents.budget import (
    NONE,
    Budget,
    Meter,
    choose,
    from_metadata,
    parse,
    parse_text,
    tighten,
)
from agent_replay.agents.demo import demo_agent
from agent_replay.errors import InvalidBudget
from agent_replay.ingest import Limits, chunk_from_value
from agent_replay.log.values import StoredChunk


def _catalog(value: Any) -> Budget:
    spec = json.dumps({"chat": value})
    return load_catalog(spec, {"demo": demo_agent(0)}).get("chat").budget


def test_agent_with_budget_then_its_runs_start_from_it() -> None:
    url = "http://127.0.0.1:1/a"
    assert _catalog({"url": url, "budget": {"max_seconds": 60, "max_events": 100}}) == Budget(
        max_seconds=60.0, max_events=100
    )
    assert _catalog(
        {"url": "python:tests.agents.pyagents:endless", "budget": "max_tool_calls=3",
         "on_disconnect": "cancel"}
    ) == Budget(max_tool_calls=3)  # fmt: skip
    assert _catalog(url) == NONE


@pytest.mark.parametrize(
    "value",
    [{"max_events": 0}, {"max_seconds": -1}, {"max_steps": 3}, {"max_events": 1.5}, 5, [1]],
)
def test_agent_with_malformed_budget_then_invalid_budget_naming_it(value: Any) -> None:
    with pytest.raises(InvalidBudget, match="'chat'"):
        _catalog({"url": "http://127.0.0.1:1/a", "budget": value})


def test_header_text_when_every_name_given_then_each_ceiling_set() -> None:
    text = " max_seconds=2.5 , max_events=500,max_tool_calls=3,max_output_tokens=4000"
    assert parse_text(text) == Budget(2.5, 500, 3, 4000)
    assert parse_text("max_seconds=30").max_seconds == 30.0


@pytest.mark.parametrize(
    "text",
    [
        "",
        "max_seconds",
        "max_seconds=",
        "max_seconds=soon",
        "max_seconds=0",
        "max_events=0",
        "max_events=2.5",
        "max_events=-1",
        "max_events=1,max_events=2",
        "max_events=1,",
        "max_steps=3",
        f"max_events={2**53}",
        "max_seconds=1e3",
    ],
)
def test_header_text_when_malformed_then_invalid_budget(text: str) -> None:
    with pytest.raises(InvalidBudget):
        parse_text(text)


@pytest.mark.parametrize(
    "value",
    [
        {"max_events": True},
        {"max_events": "5"},
        {"max_seconds": float("inf")},
        {"max_seconds": float("nan")},
        {"max_seconds": 400 * 86_400},
        {"max_output_tokens": None},
        {"unknown": 1},
        7,
        "max_events",
    ],
)
def test_body_when_malformed_then_invalid_budget(value: Any) -> None:
    with pytest.raises(InvalidBudget) as caught:
        parse(value, "budget")
    assert caught.value.code == "invalid_budget" and caught.value.status == 422


ceilings = st.builds(
    Budget,
    max_seconds=st.none() | st.floats(0.001, 10_000),
    max_events=st.none() | st.integers(1, 10_000),
    max_tool_calls=st.none() | st.integers(1, 10_000),
    max_output_tokens=st.none() | st.integers(1, 10_000),
)


@given(agent=ceilings, body=ceilings, header=ceilings)
def test_choose_when_request_gives_ceilings_then_each_is_the_least_given(
    agent: Budget, body: Budget, header: Budget
) -> None:
    chosen = choose(agent, body.to_json() or None, _text(header))
    for name in ("max_seconds", "max_events", "max_tool_calls", "max_output_tokens"):
        given_values = [getattr(b, name) for b in (agent, body, header)]
        present = [v for v in given_values if v is not None]
        expected = min(present) if present else None
        # The header carries seconds as decimal text: equal to within its printed digits.
        if name == "max_seconds" and expected is not None:
            assert chosen.max_seconds == pytest.approx(expected, rel=1e-9)
        else:
            assert getattr(chosen, name) == expected
        # Tighten only: never above the agent's own ceiling.
        if getattr(agent, name) is not None:
            assert getattr(chosen, name) <= getattr(agent, name) * (1 + 1e-9)


def _text(budget: Budget) -> str | None:
    parts = [f"{k}={v!r}" for k, v in budget.to_json().items()]
    return ",".join(parts) or None


def test_tighten_when_nothing_given_then_no_budget() -> None:
    assert tighten() == NONE and not tighten(NONE, NONE)


def test_stored_budget_when_read_back_then_same_and_foreign_metadata_is_none() -> None:
    budget = Budget(30.0, 500, None, 4000)
    assert from_metadata({"budget": budget.to_json()}) == budget
    assert from_metadata({"budget": {"max_events": "lots"}}) == NONE
    assert from_metadata({"budget": 3}) == NONE and from_metadata({}) == NONE


def test_time_when_run_older_than_max_seconds_then_out_of_time_naming_it() -> None:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    budget = Budget(max_seconds=30)
    assert budget.out_of_time(created, (created + timedelta(seconds=29.9)).timestamp()) is None
    message = budget.out_of_time(created, (created + timedelta(seconds=30)).timestamp())
    assert message is not None and "max_seconds=30" in message
    assert NONE.out_of_time(created, 1e12) is None


# -- the meter ---------------------------------------------------------------------------


def _chunk(value: dict[str, Any]) -> StoredChunk:
    return chunk_from_value(value, 0, Limits())


def _event(kind: str, n: int) -> dict[str, Any]:
    if kind == "text":
        return {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "x" * n}
    if kind == "call":
        return {"type": "TOOL_CALL_START", "toolCallId": f"c{n}", "toolCallName": "t"}
    if kind == "args":
        return {"type": "TOOL_CALL_ARGS", "toolCallId": "c0", "delta": "y" * n}
    if kind == "usage":
        return {"type": "STEP_FINISHED", "stepName": "s", "usage": {"completionTokens": n}}
    if kind == "spec-usage":
        return {"type": "CUSTOM", "name": "u", "usage": [{"outputTokens": n}]}
    return {"type": "STEP_STARTED", "stepName": "s"}


events = st.lists(
    st.tuples(st.sampled_from(["text", "call", "args", "usage", "spec-usage", "other"]),
              st.integers(0, 40)),
    max_size=60,
)  # fmt: skip


def _expected(budget: Budget, values: list[dict[str, Any]]) -> int:
    """How many of `values` the documented rules admit: a count written apart from the meter."""
    n_calls = reported = chars = 0
    calls: set[str] = set()
    for index, value in enumerate(values):
        n_events = index  # every event before it was admitted
        kind = value["type"]
        new_call = kind == "TOOL_CALL_START" and value["toolCallId"] not in calls
        delta = value.get("delta", "") if kind.endswith(("CONTENT", "ARGS")) else ""
        usage = value.get("usage")
        report = None
        if isinstance(usage, dict):
            report = usage["completionTokens"]
        elif isinstance(usage, list):
            report = sum(u["outputTokens"] for u in usage)
        new_reported, new_chars = reported, chars + len(delta)
        if report is not None:
            new_reported, new_chars = reported + report, 0
        if budget.max_events is not None and n_events + 1 > budget.max_events:
            return index
        if new_call and budget.max_tool_calls is not None and n_calls + 1 > budget.max_tool_calls:
            return index
        tokens = new_reported + math.ceil(new_chars / 4)
        if budget.max_output_tokens is not None and tokens > budget.max_output_tokens:
            return index
        n_calls += new_call
        if new_call:
            calls.add(value["toolCallId"])
        reported, chars = new_reported, new_chars
    return len(values)


@settings(max_examples=500)
@given(
    budget=st.builds(
        Budget,
        max_events=st.none() | st.integers(1, 40),
        max_tool_calls=st.none() | st.integers(1, 10),
        max_output_tokens=st.integers(1, 200) | st.none(),
    ),
    script=events,
    cuts=st.lists(st.integers(0, 60), max_size=5),
)
def test_meter_when_events_arrive_in_any_batches_then_admits_exactly_the_prefix_within_budget(
    budget: Budget, script: list[tuple[str, int]], cuts: list[int]
) -> None:
    values = [_event(kind, n) for kind, n in script]
    chunks = [_chunk(v) for v in values]
    meter = Meter(budget)
    admitted: list[StoredChunk] = []
    bounds = sorted({0, len(chunks), *(c for c in cuts if c < len(chunks))})
    for lo, hi in itertools.pairwise(bounds):
        admitted += meter.admit(chunks[lo:hi])
    expected = _expected(budget, values)
    assert admitted == chunks[:expected]
    # Exhausted exactly when something was held back, and then it names the budget.
    assert (meter.exhausted is not None) == (expected < len(chunks))
    if meter.exhausted is not None:
        assert "budget is exhausted: max_" in meter.exhausted
        assert meter.admit([_chunk({"type": "RUN_FINISHED"})]) == []


def test_meter_when_terminal_event_past_every_ceiling_then_still_admitted() -> None:
    meter = Meter(Budget(max_events=1, max_output_tokens=1))
    finished = _chunk({"type": "RUN_FINISHED", "usage": {"completionTokens": 99}})
    assert meter.admit([_chunk({"type": "RUN_STARTED"}), finished]) == [
        _chunk({"type": "RUN_STARTED"}),
        finished,
    ]
    assert meter.exhausted is None


def test_meter_when_usage_reported_then_text_before_it_is_not_counted_again() -> None:
    meter = Meter(Budget(max_output_tokens=10))
    text = _chunk(_event("text", 40))  # 10 tokens by the character count
    report = _chunk(_event("usage", 5))  # the upstream says those were 5
    assert meter.admit([text, report]) == [text, report]
    assert meter.output_tokens == 5
    more = _chunk(_event("text", 21))  # 6 more: 11 in all
    assert meter.admit([more]) == [] and meter.exhausted is not None
    assert "max_output_tokens=10" in meter.exhausted
