"""`agent-replay tail` is a client of the public API: it never reaches into the service."""

from __future__ import annotations

from tests.stream.test_layering import _modules, _offending

INTERNALS = (
    "agent_replay.api",
    "agent_replay.log",
    "agent_replay.stream",
    "agent_replay.ingest",
    "agent_replay.audit",
    "agent_replay.archive",
    "agent_replay.agents",
)


def test_console_when_it_imports_the_service_internals_then_fails() -> None:
    assert _offending(_modules("console"), INTERNALS) == []
