"""A fresh clone, alone in its folder, finds everything its tests read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CASES = 16  # the golden corpus's cases (tests/projector/golden/*.jsonl) at least


def _in_clone(clone: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The clone's own `tests` (the working directory) and `agent_replay` (its src folder,
    # service/) come first on sys.path.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(clone / "service")
    return subprocess.run(
        [sys.executable, *args], cwd=clone, env=env, capture_output=True, text=True, timeout=300
    )


def test_fresh_clone_when_nothing_beside_it_then_corpus_found_inside_it(clone: Path) -> None:
    # Alone in its folder: nothing beside it (no reference material) to lean on.
    assert [p.name for p in clone.parent.iterdir()] == [clone.name]
    code = (
        "import tests.projector.conftest as c, agent_replay; print(c.CASES, agent_replay.__file__)"
    )
    where = _in_clone(clone, "-c", code)
    assert where.returncode == 0, where.stderr
    cases, package = (Path(p) for p in where.stdout.split())
    assert cases == clone / "tests" / "projector" / "golden"
    assert package.is_relative_to(clone)
    assert len(list(cases.glob("*.jsonl"))) >= CASES


def test_fresh_clone_when_conformance_tests_run_there_then_they_pass(clone: Path) -> None:
    run = _in_clone(
        clone, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/projector/test_conformance.py"
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    summary = run.stdout.strip().splitlines()[-1]
    passed = int(summary.split(" passed")[0].split()[-1])
    assert passed >= 2 * CASES + 1, summary
