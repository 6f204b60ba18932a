"""The picture of the data flow, checked: every arrow an import may follow, and no cycles.

    upstream agents ─► agents ─┐                ┌─► stream ─► durable ─────────────┐
    HTTP push, Durable Streams ┴─► ingest ─► log ┼─► projector (pure) ─────────────┼─► api, cli
                                                 └─► audit ─► archive ─► transcript ┘

Each package of `agent_replay` (under `service/`) may import only the packages its arrows come
from (and the shared modules: errors, config, metrics, logs, tasks, loopevent, event_types, chain);
nothing but the CLI imports the HTTP layer, nothing imports the CLI. And no module imports
itself through others, at import time, inside a function (a lazy import is
still a dependency) or under `if TYPE_CHECKING:` (a type is a dependency too:
the module that names it cannot be understood, or changed, without the other).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parents[1] / "service" / "agent_replay"
SHARED = {"errors", "config", "metrics", "logs", "tasks", "loopevent", "event_types", "chain"}

# package -> the packages it may import (besides itself and SHARED)
ALLOWED: dict[str, set[str]] = {
    "log": set(),
    "ingest": {"log"},
    "projector": set(),
    "stream": {"log", "projector"},
    "audit": {"log", "projector"},
    "archive": {"log", "projector", "audit"},
    "transcript": {"log", "projector", "audit", "archive"},
    "agents": {"log", "ingest"},
    # A second protocol over the same log, beside the stream.
    "durable": {"log", "ingest", "stream", "projector"},
    # `agent-replay tail`: a client of the public HTTP stream.
    "console": {"projector"},
    # The producer client: of the public HTTP API only.
    "client": set(),
    "migrations": {"log"},
    # Who may do what (keys, tokens, rules): pure, applied by the HTTP edge.
    "access": set(),
    "api": {"log", "ingest", "projector", "stream", "audit", "archive", "agents", "durable",
            "access", "migrate", "embedded", "transcript", "tracing", "workers"},
    "cli": {"log", "ingest", "projector", "stream", "audit", "archive", "agents", "durable",
            "migrate", "embedded", "transcript", "console", "api", "workers"},
    # What each `agent-replay serve --workers N` process sets up for itself.
    "workers": set(),
    # Connections opened as the log opens them (agent_replay.log.engine: several hosts work).
    "migrate": {"log"},
    "embedded": set(),
    # OpenTelemetry, set up by the HTTP layer only when an endpoint is configured.
    "tracing": set(),
    "errors": set(),
    "config": set(),
    "metrics": set(),
    "logs": set(),
    "tasks": set(),
    "loopevent": set(),
    # The AG-UI event types: what the log, the projector and the console read in a chunk.
    "event_types": set(),
    "chain": set(),
}  # fmt: skip


def module_name(path: Path, root: Path = SERVICE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, modules: set[str]) -> set[str]:
    """The `agent_replay` modules `path` imports, wherever the import is (a name imported
    from a package that is itself a module counts as that module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "agent_replay")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "agent_replay":
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in modules else node.module)
    return found


def module_paths(root: Path = SERVICE) -> dict[str, Path]:
    # A compiled module is known by its stub (`.pyi`), which imports nothing of ours.
    stubs = sorted(p for p in root.rglob("*.pyi") if not p.with_suffix(".py").exists())
    return {module_name(p, root): p for p in [*sorted(root.rglob("*.py")), *stubs]}


def graph(root: Path = SERVICE) -> dict[str, set[str]]:
    paths = module_paths(root)
    return {name: imports(path, set(paths)) & set(paths) for name, path in paths.items()}


def third_party(path: Path) -> set[str]:
    """The top-level names of what `path` imports from outside `agent_replay`."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found - {"agent_replay"}


def reached(edges: dict[str, set[str]], start: str) -> set[str]:
    """`start` and every module it imports, directly or through others."""
    seen, todo = {start}, [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def package(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a self-import."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges.get(node, ()):
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def offending(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for source, targets in sorted(edges.items()):
        mine = package(source)
        for target in sorted(targets):
            theirs = package(target)
            if theirs in (mine, "agent_replay") or theirs in SHARED:
                continue
            if theirs not in ALLOWED.get(mine, set()):
                bad.append(f"{source} imports {target}")
    return bad


EDGES = graph()


def test_packages_when_listed_then_every_one_has_its_arrows_declared() -> None:
    assert {package(m) for m in EDGES} - {"agent_replay"} <= set(ALLOWED)


def test_imports_when_they_follow_no_arrow_of_the_data_flow_then_fail() -> None:
    assert offending(EDGES) == []


def test_modules_when_they_import_each_other_in_a_circle_then_fail() -> None:
    assert cycles(EDGES) == []


# The database is the log's: outside `log/`, no module may import its driver, its query
# builder or its table definitions. Alembic runs on SQLAlchemy, so the migration
# runner (`migrate`) and the revisions' environment (`migrations`, which compares the
# database with `log.schema`) may; nothing that serves a request imports either.
DATABASE_MODULES = ("asyncpg", "sqlalchemy", "agent_replay.log.schema")
DATABASE_ALLOWED = {"agent_replay.migrate", "agent_replay.migrations"}


def database_imports(path: Path) -> set[str]:
    """The modules of `DATABASE_MODULES` that `path` imports, at import time or in a
    function (`if TYPE_CHECKING:` blocks too: a type is knowledge of the layout)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found.update(m for m in DATABASE_MODULES for n in names if n == m or n.startswith(m + "."))
    return found


def database_offenders(root: Path = SERVICE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        name = module_name(path, root)
        if package(name) == "log" or any(
            name == a or name.startswith(a + ".") for a in DATABASE_ALLOWED
        ):
            continue
        bad += [f"{name} imports {m}" for m in sorted(database_imports(path))]
    return bad


def test_database_when_reached_from_outside_the_log_then_fail() -> None:
    assert database_offenders() == []


@pytest.mark.parametrize(
    "text",
    [
        "import asyncpg\n",
        "from sqlalchemy.ext.asyncio import AsyncEngine\n",
        "def f():\n    from agent_replay.log.schema import runs\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import sqlalchemy\n",
        "from agent_replay.log import schema\n",
    ],
)
def test_database_checker_when_a_module_outside_the_log_imports_it_then_reports_it(
    tmp_path: Path, text: str
) -> None:
    root = tmp_path / "agent_replay"
    for name in ("log", "audit"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
    (root / "log" / "inside.py").write_text(text)
    (root / "audit" / "outside.py").write_text(text)
    assert [line.split(" imports ")[0] for line in database_offenders(root)] == [
        "agent_replay.audit.outside"
    ]


def test_memory_store_when_its_imports_are_followed_then_none_reaches_postgresql() -> None:
    """The second implementation of the log's contract is independent of the first: the
    in-memory store, and all it imports, import neither the driver nor the SQL toolkit."""
    paths = module_paths()
    postgresql = {"asyncpg", "sqlalchemy", "psycopg", "alembic"}
    modules = reached(EDGES, "agent_replay.log.memory")
    assert {"agent_replay.log.store", "agent_replay.log.values"} <= modules
    assert {m for m in modules if third_party(paths[m]) & postgresql} == set()


@pytest.mark.parametrize(
    ("source", "text", "problem"),
    [
        ("log/x.py", "from agent_replay.stream.hub import Hub\n",
         "log.x imports agent_replay.stream.hub"),
        ("stream/x.py", "def f():\n    from agent_replay.ingest import batch\n",
         "agent_replay.ingest"),
        ("agents/x.py", "import agent_replay.audit.cache\n", "imports agent_replay.audit.cache"),
    ],
)  # fmt: skip
def test_checker_when_given_a_forbidden_arrow_then_reports_it(
    tmp_path: Path, source: str, text: str, problem: str
) -> None:
    root = tmp_path / "agent_replay"
    for name in ("log", "stream", "ingest", "agents", "audit"):
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text("")
    (root / "stream" / "hub.py").write_text("")
    (root / "ingest" / "batch.py").write_text("")
    (root / "audit" / "cache.py").write_text("")
    (root / source).write_text(text)
    assert any(problem in line for line in offending(graph(root)))


def _package_of(root: Path, name: str, modules: dict[str, str]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text("")
    for module, text in modules.items():
        (root / name / f"{module}.py").write_text(text)


def test_checker_when_modules_import_each_other_lazily_then_reports_the_cycle(
    tmp_path: Path,
) -> None:
    root = tmp_path / "agent_replay"
    _package_of(root, "transcript", {
        "render": "def render():\n    from agent_replay.transcript.html import html\n",
        "html": "from agent_replay.transcript.render import views\n",
        "plain": "from agent_replay.transcript import html\n",
    })  # fmt: skip
    assert cycles(graph(root)) == [
        ["agent_replay.transcript.html", "agent_replay.transcript.render"]
    ]


def test_checker_when_a_cycle_closes_only_under_type_checking_then_reports_it(
    tmp_path: Path,
) -> None:
    """The cycle the log's contract once had: the implementation imports the contract, the
    contract names the implementation's types for the type checker only."""
    root = tmp_path / "agent_replay"
    _package_of(root, "log", {
        "eventlog": "from agent_replay.log.request import AppendResult\n",
        "request": "from agent_replay.log.store import RunState\n",
        "store": "from typing import TYPE_CHECKING\n"
                 "if TYPE_CHECKING:\n"
                 "    from agent_replay.log.eventlog import Run\n",
        "values": "from typing import TYPE_CHECKING\n"
                  "if TYPE_CHECKING:\n"
                  "    from collections.abc import Sequence\n",
    })  # fmt: skip
    assert cycles(graph(root)) == [
        ["agent_replay.log.eventlog", "agent_replay.log.request", "agent_replay.log.store"]
    ]
