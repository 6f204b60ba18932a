"""The ``project`` command: JSONL logs, export files, snapshots, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_replay.projector.cli import main
from tests.projector.conftest import CASES

TEXT_CASE = CASES / "text_plain.jsonl"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_project_when_jsonl_log_then_prints_final_messages(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, str(TEXT_CASE))
    assert code == 0
    expected = json.loads((CASES / "text_plain.expected.json").read_text("utf-8"))
    assert [m["parts"] for m in json.loads(out)] == [m["parts"] for m in expected]


def test_project_when_export_file_then_projects_its_envelopes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chunks = [json.loads(line) for line in TEXT_CASE.read_text("utf-8").splitlines() if line]
    header = {"format": "replay-export", "version": 1, "run_id": "r"}
    envelopes = [
        {"run_id": "r", "seq": i + 1, "received_at": "2025-01-01T00:00:00Z", "chunk": c}
        for i, c in enumerate(chunks)
    ]
    export = tmp_path / "run.jsonl"
    export.write_text("\n".join(json.dumps(x) for x in [header, *envelopes]) + "\n", "utf-8")
    assert run(capsys, str(export))[1] == run(capsys, str(TEXT_CASE))[1]


def test_project_when_snapshots_then_one_line_per_chunk_and_finalize(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--snapshots", str(TEXT_CASE))
    lines = [json.loads(line) for line in out.split("\n") if line]
    chunk_count = len([x for x in TEXT_CASE.read_text("utf-8").split("\n") if x.strip()])
    assert code == 0
    assert [x["index"] for x in lines] == [*range(chunk_count), "finalize"]
    assert lines[0]["type"] == "RUN_STARTED"


def test_project_when_a_line_is_not_an_object_then_exit_2_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bad.jsonl"
    log.write_text('{"type":"RUN_STARTED","runId":"r"}\n\n[1,2]\n', "utf-8")
    code, out, err = run(capsys, str(log))
    assert code == 2
    assert out == ""
    assert "line 3" in err


def test_project_when_string_holds_u2028_then_line_is_not_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "sep.jsonl"
    chunk = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "a\u2028b\u0085c"}
    log.write_text(json.dumps(chunk, ensure_ascii=False) + "\n", "utf-8")
    code, out, _ = run(capsys, str(log))
    assert code == 0
    assert json.loads(out)[0]["parts"] == [{"type": "text", "content": "a\u2028b\u0085c"}]
