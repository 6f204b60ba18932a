"""The reference pages of the manual are generated from the code (ops/docs_reference.py):
a committed page that differs from what the code generates now is out of date."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("configuration.md", "cli.md", "http.md")


def test_committed_reference_pages_match_what_the_code_generates(tmp_path: Path) -> None:
    # A subprocess, as a developer runs it: the generator clears REPLAY_* for itself.
    subprocess.run(
        [sys.executable, str(ROOT / "ops" / "docs_reference.py"), "--out", str(tmp_path)],
        check=True,
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )
    stale = [
        name
        for name in PAGES
        if (tmp_path / name).read_text(encoding="utf-8")
        != (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8")
    ]
    assert not stale, (
        f"docs/reference/{', '.join(stale)} out of date: run `python ops/docs_reference.py`"
    )


def test_a_changed_page_is_reported_as_out_of_date(tmp_path: Path) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "ops" / "docs_reference.py"), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    generated = (tmp_path / "cli.md").read_text(encoding="utf-8")
    committed = (ROOT / "docs" / "reference" / "cli.md").read_text(encoding="utf-8")
    assert generated == committed
    assert generated.replace("serve", "sreve") != committed


def test_every_setting_has_a_description() -> None:
    # The configuration page is the settings class: a field without a description
    # would be a blank row there.
    sys.path.insert(0, str(ROOT / "ops"))
    try:
        import docs_reference
    finally:
        sys.path.remove(str(ROOT / "ops"))
    assert docs_reference.undescribed_settings() == []
