"""The projector is pure: it imports only the standard library, itself, and the catalog of
event types (`agent_replay.event_types`), which is as pure."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import agent_replay.event_types
import agent_replay.projector

PACKAGE = Path(agent_replay.projector.__file__).parent
CATALOG = Path(agent_replay.event_types.__file__)


def test_projector_modules_when_parsed_then_import_only_stdlib_and_projector() -> None:
    offenders = []
    for path in [*sorted(PACKAGE.glob("*.py")), CATALOG]:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            for name in names:
                top = name.split(".")[0]
                inside = name in (
                    "agent_replay.projector",
                    "agent_replay.event_types",
                ) or name.startswith("agent_replay.projector.")
                if not inside and top not in sys.stdlib_module_names:
                    offenders.append(f"{path.name}: {name}")
    assert offenders == []
