"""Imports flow one way: log ← stream ← api; nothing but the CLI imports the HTTP layer."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[2] / "service" / "agent_replay"


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _modules(package: str) -> list[Path]:
    return sorted((SERVICE / package).rglob("*.py"))


def _offending(paths: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return [
        f"{path} imports {name}"
        for path in paths
        for name in sorted(_imports(path))
        if any(name == f or name.startswith(f + ".") for f in forbidden)
    ]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (
            "log",
            (
                "agent_replay.stream",
                "agent_replay.api",
                "agent_replay.projector",
                "agent_replay.ingest",
                "agent_replay.durable",
            ),
        ),
        (
            "stream",
            (
                "agent_replay.api",
                "agent_replay.projector",
                "agent_replay.ingest",
                "agent_replay.durable",
            ),
        ),
        # Durable Streams: beside the stream, over the log; never the HTTP layer.
        (
            "durable",
            (
                "agent_replay.api",
                "agent_replay.projector",
                "agent_replay.audit",
                "agent_replay.agents",
            ),
        ),
    ],
)
def test_layers_when_package_imports_a_layer_to_its_right_then_fails(
    package: str, forbidden: tuple[str, ...]
) -> None:
    assert _offending(_modules(package), forbidden) == []


def test_layers_when_anything_but_cli_imports_http_layer_then_fails() -> None:
    outside = [
        p
        for p in SERVICE.rglob("*.py")
        if SERVICE / "api" not in p.parents and p != SERVICE / "cli.py"
    ]
    assert _offending(outside, ("agent_replay.api",)) == []


def test_layers_checker_when_given_a_violation_then_reports_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from agent_replay.api.deps import AppState\nimport agent_replay.stream.hub\n")
    assert len(_offending([bad], ("agent_replay.api", "agent_replay.stream"))) == 3
