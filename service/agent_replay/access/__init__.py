"""Who may do what: scoped API keys, signed thread and run tokens, the route rules.

Pure and synchronous (no HTTP, no database): `agent_replay.api.auth` applies it at
the edge, loading the token secret once through the log. The log knows nothing
of credentials.
"""

from agent_replay.access.keys import KeyRing, Scope
from agent_replay.access.policy import Action, Rule, Target, permits
from agent_replay.access.tokens import Claims, TokenScope, TokenSigner

__all__ = [
    "Action",
    "Claims",
    "KeyRing",
    "Rule",
    "Scope",
    "Target",
    "TokenScope",
    "TokenSigner",
    "permits",
]
