"""The headers a route that starts a hosted run hands on to its upstream.

The agent's allowlist (`agent_replay.agents.forwarding`) picks them from the request;
here, at the edge that knows the credentials, a picked value holding the service's
own credential is refused (400 `forwarded_credential`, nothing started): the
request's key or token (a page that copied it into the header it forwards), or any
configured API key. The allowlist already never reads `Authorization`; this catches
the credential copied elsewhere by mistake, before it leaves for another server.
"""

from __future__ import annotations

from fastapi import Request

from agent_replay.access import KeyRing
from agent_replay.agents.catalog import HttpAgent
from agent_replay.api.auth import bearer
from agent_replay.api.deps import state_of
from agent_replay.errors import ForwardedCredential

# A credential shorter than this is not looked for inside another value: it would
# match by chance (the service's keys and tokens are far longer).
_SHORTEST = 8


def forwarded_headers(request: Request, agent_name: str) -> dict[str, str]:
    """The upstream headers (name to value) the run of `agent_name` that `request`
    starts is sent."""
    state = state_of(request)
    agent = state.drivers.catalog.get(agent_name)
    if not isinstance(agent, HttpAgent) or not agent.forward:
        return {}
    picked = agent.forward.pick(request.headers.items())
    own = bearer(request)
    keys: KeyRing = state.gate.keys
    for name, value in picked.items():
        words = [value, *value.replace(",", " ").replace(";", " ").replace("=", " ").split()]
        if (own is not None and len(own) >= _SHORTEST and own in value) or any(
            keys.scopes(word) is not None for word in words
        ):
            raise ForwardedCredential(
                f"the header forwarded as {name!r} holds this service's own credential; "
                "it is never sent to an upstream"
            )
    return picked
