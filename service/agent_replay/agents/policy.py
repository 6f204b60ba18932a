"""What a hosted run does when nobody reads it any more: its disconnect policy.

`continue` (the default) lets the run finish whoever listens; `cancel` stops it
as soon as its last reader leaves; `cancel_after` stops it once no reader has
been attached for `grace_seconds`. A policy comes from the agent's entry in
`REPLAY_AGENTS` and may be overridden per request (a body field `onDisconnect`
or the `X-On-Disconnect` header), in either form:

    {"policy": "cancel_after", "grace_seconds": 30}     cancel_after=30

A run that no reader ever attached to counts its absence from its start; for
`cancel` (no grace) that would stop it before its starter could follow it, so
it waits a first-reader window (`REPLAY_FIRST_READER_SECONDS`) for one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Final

from agent_replay.errors import InvalidRequest

CONTINUE: Final = "continue"
CANCEL: Final = "cancel"
CANCEL_AFTER: Final = "cancel_after"
POLICIES: Final = (CONTINUE, CANCEL, CANCEL_AFTER)

# How long a `cancel` run nobody has followed yet waits for its first reader,
# unless the settings say otherwise (REPLAY_FIRST_READER_SECONDS).
FIRST_READER_SECONDS: Final = 10.0
# A day: a longer grace is a `continue` that forgot to say so.
MAX_GRACE_SECONDS: Final = 86_400.0

_HEADER = re.compile(r"\s*(continue|cancel|cancel_after)\s*(?:=\s*([0-9]+(?:\.[0-9]+)?)\s*)?")


class InvalidOnDisconnect(InvalidRequest):
    code = "invalid_on_disconnect"


@dataclass(frozen=True, slots=True)
class OnDisconnect:
    policy: str = CONTINUE
    grace_seconds: float | None = None  # only for cancel_after

    @property
    def watched(self) -> bool:
        """Does the run's driver watch its readers at all?"""
        return self.policy != CONTINUE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"policy": self.policy}
        if self.policy == CANCEL_AFTER:
            out["grace_seconds"] = self.grace_seconds
        return out

    def wait_seconds(
        self, ever_read: bool, first_reader_seconds: float = FIRST_READER_SECONDS
    ) -> float:
        """How long the run may go unread before it is cancelled."""
        if self.policy == CANCEL_AFTER:
            return self.grace_seconds or 0.0
        return 0.0 if ever_read else first_reader_seconds


DEFAULT: Final = OnDisconnect()


def _make(policy: str, grace: Any, where: str) -> OnDisconnect:
    if policy not in POLICIES:
        raise InvalidOnDisconnect(
            f"{where}: policy {str(policy)[:40]!r} is not one of {', '.join(POLICIES)}"
        )
    if policy != CANCEL_AFTER:
        if grace is not None:
            raise InvalidOnDisconnect(f"{where}: grace_seconds goes only with cancel_after")
        return OnDisconnect(policy)
    if isinstance(grace, bool) or not isinstance(grace, (int, float)):
        raise InvalidOnDisconnect(f"{where}: cancel_after needs grace_seconds (a number)")
    if not math.isfinite(grace) or not 0 <= grace <= MAX_GRACE_SECONDS:
        raise InvalidOnDisconnect(
            f"{where}: grace_seconds must be between 0 and {MAX_GRACE_SECONDS:.0f}"
        )
    return OnDisconnect(CANCEL_AFTER, float(grace))


def parse_text(text: str, where: str = "X-On-Disconnect") -> OnDisconnect:
    """`continue`, `cancel` or `cancel_after=SECONDS`."""
    match = _HEADER.fullmatch(text)
    if match is None:
        raise InvalidOnDisconnect(
            f"{where}: {text[:60]!r} is not continue, cancel or cancel_after=SECONDS"
        )
    policy, grace = match.group(1), match.group(2)
    return _make(policy, None if grace is None else float(grace), where)


def parse(value: Any, where: str) -> OnDisconnect:
    """A policy as JSON gives it: an object `{"policy", "grace_seconds"}` or the header's text."""
    if isinstance(value, str):
        return parse_text(value, where)
    if not isinstance(value, dict):
        raise InvalidOnDisconnect(
            f'{where}: expected {{"policy": ..., "grace_seconds": ...}} or "cancel_after=SECONDS"'
        )
    unknown = sorted(set(value) - {"policy", "grace_seconds"})
    if unknown:
        raise InvalidOnDisconnect(f"{where}: unknown field(s) {', '.join(unknown)}")
    return _make(value.get("policy", CONTINUE), value.get("grace_seconds"), where)


def from_record(policy: str | None, grace: float | None) -> OnDisconnect:
    """As the run's row keeps it (a run made by appends has none: `continue`)."""
    if policy is None or policy == CONTINUE:
        return DEFAULT
    return OnDisconnect(policy, grace if policy == CANCEL_AFTER else None)


def choose(agent_default: OnDisconnect, body: Any, header: str | None) -> OnDisconnect:
    """The request's policy (body field or header; both must agree), else the agent's."""
    from_body = None if body is None else parse(body, "onDisconnect")
    from_header = None if header is None else parse_text(header)
    if from_body is not None and from_header is not None and from_body != from_header:
        raise InvalidOnDisconnect("onDisconnect and X-On-Disconnect disagree: send one")
    return from_body or from_header or agent_default
