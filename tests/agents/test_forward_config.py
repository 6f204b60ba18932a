"""An agent's `forward_headers`: parsed, or refused at start-up naming the agent; and the
values a request's headers give, picked and bounded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agent_replay.agents.catalog import HttpAgent, load_catalog
from agent_replay.agents.forwarding import MAX_FORWARDED, MAX_FORWARDED_BYTES, Forwarding, parse
from agent_replay.api.app import create_app
from agent_replay.config import Settings
from agent_replay.errors import ForwardedHeadersTooLarge, InvalidRequest

URL = "http://127.0.0.1:3000/api/chat"


def _agent(**fields: Any) -> HttpAgent:
    agent = load_catalog(json.dumps({"next": {"url": URL, **fields}}), {}).get("next")
    assert isinstance(agent, HttpAgent)
    return agent


def test_forward_headers_as_a_list_when_loaded_then_each_name_forwarded_under_itself() -> None:
    agent = _agent(protocol="ai-sdk", forward_headers=["Cookie", "X-User-Id"])
    assert agent.forward.pairs == (("cookie", "cookie"), ("x-user-id", "x-user-id"))
    assert agent.protocol == "ai-sdk"


def test_forward_headers_as_an_object_when_loaded_then_request_header_renamed_upstream() -> None:
    agent = _agent(forward_headers={"X-Upstream-Authorization": "Authorization"})
    assert agent.forward.pairs == (("x-upstream-authorization", "authorization"),)
    assert agent.forward.sources == ("x-upstream-authorization",)


def test_forward_headers_beside_every_other_field_when_loaded_then_all_kept() -> None:
    agent = _agent(
        headers={"X-Static": "s"}, protocol="ai-sdk", budget={"max_events": 9},
        on_disconnect={"policy": "continue"}, redact=["email"], forward_headers=["cookie"],
    )  # fmt: skip
    assert agent.forward.sources == ("cookie",)
    assert agent.headers == {"X-Static": "s"} and agent.budget.max_events == 9
    assert agent.on_disconnect.policy == "continue" and agent.redact


@pytest.mark.parametrize(
    ("forward", "says"),
    [
        (["authorization"], "never forwarded"),
        ({"Authorization": "x-user"}, "never forwarded"),
        (["connection"], "hop-by-hop"),
        (["Transfer-Encoding"], "hop-by-hop"),
        ({"x-host": "host"}, "hop-by-hop"),
        ({"x-len": "content-length"}, "hop-by-hop"),
        (["accept-encoding"], "hop-by-hop"),
        (["content-type"], "hop-by-hop"),
        (["bad name"], "not a header name"),
        (["x-a\r\nx-b"], "not a header name"),
        ([""], "not a header name"),
        (["x-a", "X-A"], "forwarded twice"),
        ({"x-a": "x-c", "x-b": "x-c"}, "two request headers fill"),
        ("cookie", "must be a list"),
        ({"x-a": 1}, "must be a list"),
        ([f"x-{i}" for i in range(MAX_FORWARDED + 1)], f"at most {MAX_FORWARDED}"),
    ],
)
def test_forward_headers_malformed_when_loaded_then_refused_naming_the_agent(
    forward: Any, says: str
) -> None:
    with pytest.raises(InvalidRequest, match=says) as refused:
        _agent(forward_headers=forward)
    assert "agent 'next': forward_headers" in refused.value.message


def test_forwarded_header_the_agent_sets_itself_when_loaded_then_refused() -> None:
    with pytest.raises(InvalidRequest, match="sets 'x-tenant' itself"):
        _agent(headers={"X-Tenant": "acme"}, forward_headers=["x-tenant"])
    with pytest.raises(InvalidRequest, match="sets 'authorization' itself"):
        load_catalog(
            json.dumps({"a": {"url": "http://u:p@127.0.0.1:1/x",
                              "forward_headers": {"x-auth": "authorization"}}}), {}
        )  # fmt: skip


def test_forward_headers_on_a_python_agent_when_loaded_then_refused() -> None:
    spec = {"py": {"url": "python:tests.agents.pyagents:endless", "forward_headers": ["cookie"]}}
    with pytest.raises(InvalidRequest, match="agent 'py': forward_headers needs an http"):
        load_catalog(json.dumps(spec), {})


def test_service_with_a_bad_forward_list_when_created_then_start_up_fails_naming_it() -> None:
    agents = {"next": {"url": URL, "forward_headers": ["authorization"]}}
    with pytest.raises(InvalidRequest, match="agent 'next'"):
        create_app(Settings(agents=json.dumps(agents)))


def test_repeated_headers_when_picked_then_joined_cookies_with_semicolons() -> None:
    forward = parse(["cookie", "x-tag"], "t")
    headers = [("cookie", "a=1"), ("x-tag", "p"), ("cookie", "b=2"), ("x-tag", "q"), ("x-no", "n")]
    assert forward.pick(headers) == {"cookie": "a=1; b=2", "x-tag": "p, q"}


def test_forwarded_values_over_the_bound_when_picked_then_refused_431() -> None:
    forward = parse(["x-a", "x-b"], "t")
    half = "v" * (MAX_FORWARDED_BYTES // 2)
    assert forward.pick([("x-a", half), ("x-b", half)]) == {"x-a": half, "x-b": half}
    with pytest.raises(ForwardedHeadersTooLarge) as refused:
        forward.pick([("x-a", half), ("x-b", half + "v")])
    assert refused.value.status == 431 and refused.value.code == "forwarded_headers_too_large"


_names = st.sampled_from(["cookie", "x-user-id", "x-a", "authorization", "x-b", "host"])


@given(
    allow=st.dictionaries(st.sampled_from(["cookie", "x-user-id", "x-a"]),
                          st.sampled_from(["cookie", "x-user-id", "x-up", "authorization"]),
                          max_size=3),
    headers=st.lists(st.tuples(_names, st.text(st.characters(max_codepoint=255), max_size=20)),
                     max_size=12),
)  # fmt: skip
def test_any_request_headers_when_picked_then_only_allowlisted_ones_under_their_targets(
    allow: dict[str, str], headers: list[tuple[str, str]]
) -> None:
    assume(len(set(allow.values())) == len(allow))  # else refused at start-up (above)
    forward: Forwarding = parse(allow, "t")
    picked = forward.pick(headers)
    assert set(picked) <= set(allow.values())
    for source, target in allow.items():
        sent = [value for name, value in headers if name == source]
        if sent:
            joiner = "; " if source == "cookie" else ", "
            assert picked[target] == joiner.join(sent)
        else:
            assert target not in picked
