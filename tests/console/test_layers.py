"""`replay tail` is a client of the public API: it never reaches into the service."""

from __future__ import annotations

from tests.stream.test_layering import _modules, _offending

INTERNALS = (
    "service.api",
    "service.log",
    "service.stream",
    "service.ingest",
    "service.audit",
    "service.archive",
    "service.agents",
)


def test_console_when_it_imports_the_service_internals_then_fails() -> None:
    assert _offending(_modules("console"), INTERNALS) == []
