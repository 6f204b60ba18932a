"""Disconnect policies as `REPLAY_AGENTS` and requests spell them: parsed, or refused clearly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.agents import load_catalog
from service.agents.demo import demo_agent
from service.agents.policy import (
    CANCEL,
    CANCEL_AFTER,
    CONTINUE,
    InvalidOnDisconnect,
    OnDisconnect,
    choose,
    parse,
    parse_text,
)


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
