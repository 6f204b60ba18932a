"""The README stays a five-minute read, every relative link in it and in the manual
resolves (file and anchor), and the manual builds with `mkdocs build --strict`."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from markdown.extensions.toc import slugify

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def _prose(text: str) -> str:
    return FENCE.sub("", text)


def anchors(text: str) -> set[str]:
    """Heading ids as MkDocs makes them (Python-Markdown's toc: slugify, then `_1`, `_2`
    for a repeated one)."""
    seen: set[str] = set()
    for heading in HEADING.findall(_prose(text)):
        plain = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
        plain = plain.replace("`", "").replace("**", "").replace("*", "")
        slug = base = slugify(plain, "-")
        n = 0
        while slug in seen:
            n += 1
            slug = f"{base}_{n}"
        seen.add(slug)
    return seen


def broken_links(page: Path) -> list[str]:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(CODE_SPAN.sub("", _prose(text))):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # http:, https:, mailto:: not ours to check offline
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.is_file():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(resolved.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    return broken


def pages() -> list[Path]:
    top = [ROOT / name for name in ("README.md", "CONTRIBUTING.md", "CHANGELOG.md")]
    return [*top, *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_readme_is_at_most_200_lines() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= 200, f"README.md has {lines} lines: move detail into docs/"


def test_every_relative_link_of_the_readme_and_the_manual_resolves() -> None:
    broken = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken_links(p))}
    assert not broken, broken


def test_a_link_to_a_missing_file_or_heading_is_found(tmp_path: Path) -> None:
    (tmp_path / "target.md").write_text("# Title\n\n## Faults and retries\n\n## `x` twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](target.md#faults-and-retries) [ok](target.md#x-twice) [ok](#here)\n"
        "[gone](missing.md) [bad](target.md#nowhere) `[code](missing.md)`\n\n# Here\n"
        "```\n[in a fence](missing.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "target.md#nowhere: no heading #nowhere in target.md",
    ]


def test_the_manual_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    # Not -q: mkdocs 1.6 exits 0 on a strict failure when its warnings are silenced.
    mkdocs = Path(sys.executable).parent / "mkdocs"
    result = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "reference" / "http" / "index.html").is_file()
