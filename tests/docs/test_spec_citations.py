"""Every section of the projector specification the code cites ("spec §N") is in the
repository's copy, docs/projector-spec.md, as a heading."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "docs" / "projector-spec.md"
# `§9b`, `§6.4`: a section number, a sub-section after a dot, or a letter suffix.
CITATION = re.compile(r"§(\d+(?:\.\d+)?[a-z]?)")
# `## 6. Text`, `### 6.1 TEXT_MESSAGE_START`, `## 9b. MESSAGES_SNAPSHOT`.
HEADING = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)?[a-z]?)\.?\s", re.MULTILINE)


def _cited() -> dict[str, list[str]]:
    cited: dict[str, list[str]] = {}
    for path in sorted((ROOT / "service").rglob("*")):
        if path.suffix not in {".py", ".c", ".pyi", ".sql", ".html", ".js"}:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for section in CITATION.findall(line):
                where = f"{path.relative_to(ROOT)}:{number}"
                cited.setdefault(section, []).append(where)
    return cited


def test_every_section_the_code_cites_is_a_heading_of_the_spec() -> None:
    cited = _cited()
    # The code cites the spec in more than a dozen places: finding none means the
    # pattern or the walk is broken, not that the code stopped citing it.
    assert len(cited) >= 10, cited
    headings = set(HEADING.findall(SPEC.read_text(encoding="utf-8")))
    missing = {section: where for section, where in cited.items() if section not in headings}
    assert not missing, f"cited but not a heading of docs/projector-spec.md: {missing}"


def test_a_citation_of_a_section_the_spec_lacks_is_found() -> None:
    headings = set(HEADING.findall(SPEC.read_text(encoding="utf-8")))
    assert CITATION.findall("see spec §9b and §6.4, not §42") == ["9b", "6.4", "42"]
    assert {"9b", "6.4"} <= headings
    assert "42" not in headings
