"""Which agents exist: the built-in `demo` plus what `REPLAY_AGENTS` names.

`REPLAY_AGENTS` is a JSON object mapping a name to either the URL of an
AG-UI HTTP agent, `{"url": ..., "headers": {...}}`, or `"python:module:function"`
for an in-process async generator `function(run_input) -> AsyncIterator[dict]`.
The object form may give the agent's disconnect policy (`agent_replay.agents.policy`):
`{"url": ..., "on_disconnect": {"policy": "cancel_after", "grace_seconds": 30}}`
(`url` may be a `python:` one there too), its budget (`agent_replay.agents.budget`):
`{"url": ..., "budget": {"max_seconds": 600}}`, its redaction rules, added to the
service's: `{"url": ..., "redact": ["email", "ticket=T-[0-9]{6}"]}`, and the protocol its
URL speaks: `"protocol": "ag-ui"` (the default) or `"ai-sdk"`, an AI SDK chat endpoint
(`agent_replay.agents.ai_sdk`). An HTTP agent may name the starting request's headers its
upstream is sent, `"forward_headers": ["cookie"]` (`agent_replay.agents.forwarding`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from agent_replay.agents.budget import NONE as NO_BUDGET
from agent_replay.agents.budget import Budget
from agent_replay.agents.budget import parse as parse_budget
from agent_replay.agents.forwarding import NONE as NO_FORWARDING
from agent_replay.agents.forwarding import Forwarding
from agent_replay.agents.forwarding import parse as parse_forwarding
from agent_replay.agents.policy import DEFAULT, OnDisconnect, parse
from agent_replay.errors import InvalidRequest, NotFound
from agent_replay.ingest import DEFAULT_MAX_WINDOW, NONE, RuleSet, parse_rules

RunInput = dict[str, Any]
ChunkSource = Callable[[RunInput], AsyncIterator[dict[str, Any]]]


class AgentNotFound(NotFound):
    code = "agent_not_found"


# What an HTTP agent's URL speaks: AG-UI's RunAgentInput in, its events out; or the
# AI SDK's chat request in (what `useChat` posts), its UI message stream out.
PROTOCOLS = ("ag-ui", "ai-sdk")


@dataclass(frozen=True)
class HttpAgent:
    name: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    on_disconnect: OnDisconnect = DEFAULT
    budget: Budget = NO_BUDGET
    protocol: str = "ag-ui"
    redact: RuleSet = NONE
    # The starting request's headers sent on to the upstream: never stored anywhere.
    forward: Forwarding = NO_FORWARDING

    @property
    def kind(self) -> str:
        return f"{self.protocol}-http"

    @property
    def own_headers(self) -> list[str]:
        """The upstream headers the agent's configuration sets itself."""
        own = list(self.headers)
        if urlsplit(self.url).username is not None:  # sent as Basic credentials
            own.append("authorization")
        return own


@dataclass(frozen=True)
class PythonAgent:
    name: str
    source: ChunkSource
    on_disconnect: OnDisconnect = DEFAULT
    budget: Budget = NO_BUDGET
    redact: RuleSet = NONE

    @property
    def kind(self) -> str:
        return "python"


Agent = HttpAgent | PythonAgent


@dataclass(frozen=True)
class AgentCatalog:
    agents: Mapping[str, Agent]

    def get(self, name: str) -> Agent:
        agent = self.agents.get(name)
        if agent is None:
            known = ", ".join(sorted(self.agents))
            raise AgentNotFound(f"no agent named {name!r} (known: {known})")
        return agent


def _import_source(spec: str, name: str) -> ChunkSource:
    module_name, _, attr = spec.partition(":")
    try:
        source = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidRequest(f"agent {name!r}: cannot import {spec!r}: {exc}") from exc
    if not callable(source):
        raise InvalidRequest(f"agent {name!r}: {spec!r} is not callable")
    return source  # type: ignore[no-any-return]


def _agent(name: str, value: Any, max_window: int = DEFAULT_MAX_WINDOW) -> Agent:
    if isinstance(value, dict) and isinstance(value.get("url"), str) and "forward_headers" in value:
        rest = {k: v for k, v in value.items() if k != "forward_headers"}
        agent = _agent(name, rest["url"] if set(rest) == {"url"} else rest, max_window)
        if not isinstance(agent, HttpAgent):
            raise InvalidRequest(f"agent {name!r}: forward_headers needs an http(s) URL")
        where = f"agent {name!r}: forward_headers"
        forward = parse_forwarding(value["forward_headers"], where, agent.own_headers)
        return replace(agent, forward=forward)
    if isinstance(value, dict) and isinstance(value.get("url"), str) and "redact" in value:
        rest = {k: v for k, v in value.items() if k != "redact"}
        rules = parse_rules(value["redact"], f"agent {name!r}: redact", max_window)
        agent = _agent(name, rest["url"] if set(rest) == {"url"} else rest, max_window)
        return replace(agent, redact=rules)
    if isinstance(value, str) and value.startswith("python:"):
        return PythonAgent(name, _import_source(value[len("python:") :], name))
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        return HttpAgent(name, value)
    if isinstance(value, dict) and isinstance(value.get("url"), str) and "budget" in value:
        rest = {k: v for k, v in value.items() if k != "budget"}
        limits = parse_budget(value["budget"], f"agent {name!r}: budget")
        agent = _agent(name, rest["url"] if set(rest) == {"url"} else rest)
        return replace(agent, budget=limits)
    if isinstance(value, dict) and isinstance(value.get("url"), str) and "on_disconnect" in value:
        rest = {k: v for k, v in value.items() if k != "on_disconnect"}
        on_disconnect = parse(value["on_disconnect"], f"agent {name!r}: on_disconnect")
        agent = _agent(name, rest["url"] if set(rest) == {"url"} else rest)
        return replace(agent, on_disconnect=on_disconnect)
    if isinstance(value, dict) and isinstance(value.get("url"), str):
        headers = value.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise InvalidRequest(f"agent {name!r}: headers must map strings to strings")
        protocol = value.get("protocol", "ag-ui")
        if protocol not in PROTOCOLS:
            raise InvalidRequest(
                f"agent {name!r}: protocol {protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        return HttpAgent(name, value["url"], dict(headers), protocol=protocol)
    raise InvalidRequest(
        f'agent {name!r}: expected a http(s) URL, {{"url": ..., "headers": ..., '
        '"protocol": ..., "on_disconnect": ..., "budget": ..., "forward_headers": ...}} '
        'or "python:module:function"'
    )


def load_catalog(
    spec: str | None,
    builtins: Mapping[str, Agent],
    *,
    redact_max_window: int = DEFAULT_MAX_WINDOW,
) -> AgentCatalog:
    agents: dict[str, Agent] = dict(builtins)
    if spec and spec.strip():
        try:
            configured = json.loads(spec)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"REPLAY_AGENTS is not JSON: {exc}") from exc
        if not isinstance(configured, dict):
            raise InvalidRequest("REPLAY_AGENTS must be a JSON object {name: url, ...}")
        for name, value in configured.items():
            agents[name] = _agent(name, value, redact_max_window)
    return AgentCatalog(agents)
