"""agent_replay.access is pure: it knows no HTTP, no database and no other layer."""

from __future__ import annotations

from tests.stream.test_layering import _modules, _offending


def test_access_package_when_it_imports_another_layer_then_fails() -> None:
    forbidden = ("agent_replay.log", "agent_replay.api", "agent_replay.stream",
                 "agent_replay.agents", "agent_replay.audit", "fastapi", "starlette", "asyncpg",
                 "sqlalchemy")  # fmt: skip
    assert _offending(_modules("access"), forbidden) == []


def test_log_when_it_imports_access_then_fails() -> None:
    assert _offending(_modules("log"), ("agent_replay.access",)) == []
