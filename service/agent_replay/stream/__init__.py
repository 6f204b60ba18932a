"""Replay then live tail of a run's log, exactly once, across processes.

`Hub` (one per process) listens for appends and fans them out; `plan_stream`
and `tail` serve one follower; `framing` encodes events for the wire. This
package reads the log and knows nothing of HTTP routes.
"""

from agent_replay.stream.channel import Limits
from agent_replay.stream.framing import Encoding, choose_encoding
from agent_replay.stream.hub import Hub, HubStats
from agent_replay.stream.tail import (
    NOW,
    Offset,
    Plan,
    parse_offset,
    plan_stream,
    resolve_offset,
    tail,
)

__all__ = [
    "NOW",
    "Encoding",
    "Hub",
    "HubStats",
    "Limits",
    "Offset",
    "Plan",
    "choose_encoding",
    "parse_offset",
    "plan_stream",
    "resolve_offset",
    "tail",
]
