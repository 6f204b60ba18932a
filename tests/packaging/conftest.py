"""A clone of this repository's HEAD in an empty temporary folder: what a newcomer gets
from `git clone` (committed files only, nothing beside it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.fail("git is needed to clone the repository")
    home = tmp_path_factory.mktemp("fresh")
    target = home / "agent-replay"
    subprocess.run(
        ["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)],
        check=True,
        timeout=120,
    )
    assert sorted(p.name for p in home.iterdir()) == ["agent-replay"]
    return target
