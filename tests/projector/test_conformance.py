"""Every golden case: the final messages and the messages after every chunk,
compared with the corpus's own rules (compare.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent_replay.projector import Projector, project
from tests.projector.conftest import CASES, load_compare

compare = load_compare()
NAMES = sorted(p.name.removesuffix(".jsonl") for p in CASES.glob("*.jsonl"))


def read_lines(path: Path) -> list[Any]:
    # "\n" only: some strings hold raw U+2028 / U+0085.
    return [json.loads(line) for line in path.read_text("utf-8").split("\n") if line.strip()]


def test_corpus_when_present_then_has_cases() -> None:
    assert len(NAMES) >= 16


@pytest.mark.parametrize("name", NAMES)
def test_final_messages_when_log_replayed_then_match_expected(name: str) -> None:
    chunks = read_lines(CASES / f"{name}.jsonl")
    expected = json.loads((CASES / f"{name}.expected.json").read_text("utf-8"))
    assert compare.compare_final(expected, project(chunks)) == []


@pytest.mark.parametrize("name", NAMES)
def test_messages_after_every_chunk_when_applied_incrementally_then_match_snapshots(
    name: str,
) -> None:
    chunks = read_lines(CASES / f"{name}.jsonl")
    projector = Projector()
    actual: list[dict[str, Any]] = []
    for index, chunk in enumerate(chunks):
        projector.apply(chunk)
        actual.append({"index": index, "type": chunk.get("type"), "messages": projector.messages})
    projector.finalize()
    actual.append({"index": "finalize", "messages": projector.messages})
    expected = read_lines(CASES / f"{name}.snapshots.ndjson")
    assert compare.compare_snapshots(expected, actual) == []
