"""A clone of this repository's HEAD in an empty temporary folder: what a newcomer gets
from `git clone` (committed files only, nothing beside it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    """A folder of this session's own. Not pytest's tmp_path: other pytest sessions of the
    same user prune pytest's numbered folders, and an install here takes long enough for a
    concurrent session to remove it mid-test."""
    with tempfile.TemporaryDirectory(prefix="replay-fresh-") as home:
        yield Path(home)


@pytest.fixture(scope="session")
def clone(scratch: Path) -> Path:
    if shutil.which("git") is None:
        pytest.fail("git is needed to clone the repository")
    home = scratch / "clone"
    home.mkdir()
    target = home / "agent-replay"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)],
        check=True,
        timeout=120,
    )
    assert sorted(p.name for p in home.iterdir()) == ["agent-replay"]
    return target
