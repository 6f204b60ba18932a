"""`ops/test`, the README's test command: what `--quick` leaves out, and the one message it
stops with, before anything runs, on a machine that lacks tools it cannot install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The fixtures that mean Node, a browser, a private cluster, `agent-replay serve` processes or a
# clone to install (tests/conftest.py, tests/faults/conftest.py, tests/clients/conftest.py,
# tests/packaging/conftest.py); the helpers that start clusters, nginx or processes; and
# the markers a test that uses them otherwise carries.
HEAVY_FIXTURES = {"node_harness", "durable_harness", "chromium", "cluster", "replicas", "clone"}
HEAVY_HELPERS = (
    "tests.support.cluster.",
    "tests.support.proxy.",
    "tests.support.servers.serve_subprocess",
)
HEAVY_MARKERS = {"node", "browser", "cluster", "nginx", "processes", "packaging", "slow"}
CONFORMANCE = "tests/durable/test_conformance.py::"


def _collected(tmp_path: Path, *args: str) -> tuple[list[str], list[dict[str, list[str]]]]:
    """The ids `ops/test ARGS --collect-only -q` prints, and what each collected test uses."""
    report = tmp_path / f"collected{len(list(tmp_path.iterdir()))}.jsonl"
    run = subprocess.run(
        ["ops/test", *args, "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "tests.ops.collected"],
        cwd=ROOT, env={**os.environ, "REPLAY_COLLECTED_REPORT": str(report)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    ids = [line for line in run.stdout.splitlines() if "::" in line]
    used = [json.loads(line) for line in report.read_text().splitlines()]
    return ids, used


def _heavy(test: dict[str, list[str]]) -> bool:
    return (
        bool(HEAVY_FIXTURES & set(test["fixtures"]))
        or any(h.startswith(HEAVY_HELPERS) for h in test["helpers"])
        or bool(HEAVY_MARKERS & set(test["markers"]))
    )


# It runs the whole command's preflight, which wants Node, Chromium and nginx.
@pytest.mark.node
@pytest.mark.browser
@pytest.mark.nginx
def test_quick_collection_has_no_test_using_node_browser_nginx_or_clusters_and_full_has_them(
    tmp_path: Path,
) -> None:
    quick_ids, quick = _collected(tmp_path, "--quick")
    assert quick_ids == [t["id"] for t in quick]
    assert [t["id"] for t in quick if _heavy(t)] == []
    full_ids, full = _collected(tmp_path)
    assert full_ids == [t["id"] for t in full]
    # The quick subset is the whole suite less exactly the tests that use those things.
    assert quick_ids == [t["id"] for t in full if not _heavy(t)]
    assert any(i.startswith(CONFORMANCE) for i in full_ids)
    assert not any(i.startswith(CONFORMANCE) for i in quick_ids)
    for kind in (
        "tests/faults/",
        "tests/ops/test_nginx.py",
        "tests/api/test_demo_page.py",
        "tests/stream/test_replicas.py",
        "tests/packaging/",
    ):
        assert any(i.startswith(kind) for i in full_ids), kind


def _bare_machine(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of ops/ alone in a folder, and a folder for PATH holding only bash, dirname
    and python3: no gcc, git, Chromium, nginx, Node or apt-get."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "ops", checkout / "ops")
    bare = tmp_path / "bin"
    bare.mkdir()
    # The interpreter this venv was made from: python3 with venv and its headers.
    (bare / "python3").symlink_to(Path(sys._base_executable).resolve())
    for tool in ("bash", "dirname"):
        found = shutil.which(tool)
        assert found is not None
        (bare / tool).symlink_to(found)
    return checkout, bare


def _run_bare(checkout: Path, bare: Path, *command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(bare / "bash"), *command], cwd=checkout,
        env={"PATH": str(bare), "HOME": str(checkout.parent)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


NAMED = {
    "gcc": "apt-get install gcc",
    "git": "apt-get install git",
    "Chromium": "apt-get install chromium",
    "nginx": "apt-get install nginx",
    "Node.js 20 or newer with npm": "apt-get install nodejs npm",
}


def test_preflight_when_tools_missing_and_apt_get_out_of_reach_then_one_message_names_each(
    tmp_path: Path,
) -> None:
    checkout, bare = _bare_machine(tmp_path)
    run = _run_bare(checkout, bare, "ops/preflight")
    assert run.returncode == 1 and run.stdout == ""
    message = run.stderr
    assert message.startswith("ops/test: this machine lacks what the tests need; nothing was run")
    for tool, command in NAMED.items():
        line = next((ln for ln in message.splitlines() if ln.startswith(f"  - {tool}")), "")
        assert command in line, (tool, message)
    assert "nodejs.org" in message  # where Node 20 comes from when apt's is older
    assert "apt-get install -y gcc git chromium nginx" in message
    # Nothing was made beside ops/.
    assert sorted(p.name for p in checkout.iterdir()) == ["ops"]


def test_preflight_quick_when_tools_missing_then_names_only_what_the_quick_subset_needs(
    tmp_path: Path,
) -> None:
    checkout, bare = _bare_machine(tmp_path)
    run = _run_bare(checkout, bare, "ops/preflight", "--quick")
    assert run.returncode == 1
    gcc = "  - gcc (the C extensions and their sanitizer builds): apt-get install gcc"
    assert gcc in run.stderr.splitlines()
    for unneeded in ("git", "Chromium", "nginx", "Node"):
        assert unneeded not in run.stderr


def test_ops_test_when_tools_missing_then_stops_before_making_the_venv_or_running_pytest(
    tmp_path: Path,
) -> None:
    checkout, bare = _bare_machine(tmp_path)
    (checkout / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    run = _run_bare(checkout, bare, "ops/test")
    assert run.returncode == 1 and run.stdout == ""
    assert "apt-get install chromium" in run.stderr and "Node.js 20" in run.stderr
    assert "pytest" not in run.stderr and "npm ci" not in run.stderr
    assert sorted(p.name for p in checkout.iterdir()) == ["ops", "pyproject.toml"]
