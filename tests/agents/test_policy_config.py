"""Disconnect policies as `REPLAY_AGENTS` and requests spell them: parsed, or refused clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_replay.agents import load_catalog
from agent_replay.agents.demo import demo_agent
from agent_replay.agents.policy import (
    CANCEL,
    CANCEL_AFTER,
    CONTINUE,
    InvalidOnDisconnect,
    OnDisconnect,
    choose,
    parse,
    parse_text,
)
from agent_replay.config import Settings


def _catalog(value: Any) -> OnDisconnect:
    spec = json.dumps({"chat": value})
    return load_catalog(spec, {"demo": demo_agent(0)}).get("chat").on_disconnect


def test_agent_with_cancel_after_then_its_runs_default_to_it() -> None:
    on = _catalog(
        {
            "url": "http://127.0.0.1:1/a",
            "on_disconnect": {"policy": "cancel_after", "grace_seconds": 30},
        }
    )
    assert on == OnDisconnect(CANCEL_AFTER, 30.0)


def test_python_agent_in_object_form_with_policy_then_loaded() -> None:
    on = _catalog({"url": "python:tests.agents.pyagents:broken", "on_disconnect": "cancel"})
    assert on == OnDisconnect(CANCEL)


def test_agent_without_policy_and_demo_then_continue() -> None:
    assert _catalog("http://127.0.0.1:1/a") == OnDisconnect(CONTINUE)
    assert load_catalog(None, {"demo": demo_agent(0)}).get("demo").on_disconnect.policy == CONTINUE


@pytest.mark.parametrize(
    "value",
    [
        {"policy": "sometimes"},
        {"policy": "cancel_after"},
        {"policy": "cancel_after", "grace_seconds": "30"},
        5,
    ],
)
def test_agent_with_invalid_policy_then_invalid_on_disconnect_naming_it(value: Any) -> None:
    with pytest.raises(InvalidOnDisconnect, match="'chat'"):
        _catalog({"url": "http://127.0.0.1:1/a", "on_disconnect": value})


@given(st.floats(min_value=0, max_value=86_400, allow_nan=False))
def test_header_and_object_forms_when_same_grace_then_same_policy(grace: float) -> None:
    text = parse_text(f"cancel_after={grace:f}")
    assert text == parse({"policy": "cancel_after", "grace_seconds": float(f"{grace:f}")}, "x")
    assert choose(OnDisconnect(), None, f"cancel_after={grace:f}") == text


def test_request_without_policy_then_agent_default_else_request() -> None:
    default = OnDisconnect(CANCEL)
    assert choose(default, None, None) == default
    assert choose(default, {"policy": "continue"}, None) == OnDisconnect(CONTINUE)
    assert choose(default, "cancel_after=2", "cancel_after=2.0") == OnDisconnect(CANCEL_AFTER, 2.0)


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "86401", "soon"])
def test_first_reader_seconds_when_not_a_window_then_settings_refused(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("REPLAY_FIRST_READER_SECONDS", value)
    with pytest.raises(ValidationError, match="first_reader_seconds"):
        Settings()


@pytest.mark.parametrize(("value", "seconds"), [(None, 10.0), ("0", 0.0), ("2.5", 2.5)])
def test_first_reader_seconds_when_set_or_not_then_cancel_waits_that_long_for_a_first_reader(
    monkeypatch: pytest.MonkeyPatch, value: str | None, seconds: float
) -> None:
    if value is None:
        monkeypatch.delenv("REPLAY_FIRST_READER_SECONDS", raising=False)
    else:
        monkeypatch.setenv("REPLAY_FIRST_READER_SECONDS", value)
    window = Settings().first_reader_seconds
    assert window == seconds
    cancel = OnDisconnect(CANCEL)
    assert cancel.wait_seconds(ever_read=False, first_reader_seconds=window) == seconds
    # Once read, `cancel` waits for nothing; cancel_after keeps its grace either way.
    assert cancel.wait_seconds(ever_read=True, first_reader_seconds=window) == 0.0
    grace = OnDisconnect(CANCEL_AFTER, 30.0)
    assert grace.wait_seconds(ever_read=False, first_reader_seconds=window) == 30.0
