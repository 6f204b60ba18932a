"""The `replay` command as a newcomer meets it: help that states every default, input from
a pipe, a closed pipe, quiet read-only commands, dates in the formats people type."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agent_replay.cli import build_parser, when
from agent_replay.log import EventLog
from tests.projector.conftest import CASES
from tests.support.pg import Databases

CHUNKS = CASES / "text_plain.jsonl"


def _replay(
    *args: str, stdin: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    return subprocess.run(
        [sys.executable, "-m", "agent_replay.cli", *args],
        input=stdin,
        capture_output=True,
        env={**clean, **env},
        timeout=120,
    )


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _in_required_group(parser: argparse.ArgumentParser, action: argparse.Action) -> bool:
    return any(g.required and action in g._group_actions for g in parser._mutually_exclusive_groups)


def test_every_option_of_every_subcommand_when_help_shown_then_it_says_its_default() -> None:
    missing = []
    for name, parser in _subcommands().items():
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            needs_default = (
                action.option_strings
                and not action.required
                and not _in_required_group(parser, action)
            )
            if not action.help or (needs_default and "default" not in action.help):
                missing.append(f"{name} {action.option_strings or action.dest}: {action.help!r}")
    assert missing == []
    assert len(_subcommands()) >= 8


def test_replay_help_when_asked_then_examples_name_every_subcommand() -> None:
    done = _replay("--help")
    assert done.returncode == 0
    text = done.stdout.decode()
    examples = text[text.index("examples:") :]
    for name in set(_subcommands()) - {"import"}:
        assert f"replay {name}" in examples, name
    assert "agent-replay import" in examples


def test_replay_when_no_command_then_help_on_stderr_and_exit_2() -> None:
    done = _replay()
    assert done.returncode == 2 and b"examples:" in done.stderr and done.stdout == b""


def test_project_when_dash_then_reads_standard_input() -> None:
    from_file = _replay("project", str(CHUNKS))
    from_stdin = _replay("project", "-", stdin=CHUNKS.read_bytes())
    assert from_stdin.returncode == 0, from_stdin.stderr
    assert from_stdin.stdout == from_file.stdout and json.loads(from_file.stdout)


def test_project_when_json_array_of_chunks_then_same_as_json_lines() -> None:
    chunks = [json.loads(line) for line in CHUNKS.read_text("utf-8").split("\n") if line.strip()]
    array = json.dumps(chunks, indent=2).encode()
    done = _replay("project", "-", stdin=array)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _replay("project", str(CHUNKS)).stdout


def test_project_when_json_array_holds_a_non_object_then_exit_2_naming_the_item() -> None:
    done = _replay("project", "-", stdin=b'[{"type": "RUN_STARTED"}, 7]')
    assert done.returncode == 2 and b"item 1" in done.stderr and b"Traceback" not in done.stderr


def test_project_when_reader_closes_the_pipe_then_no_traceback(tmp_path: Path) -> None:
    # Enough output to fill the pipe many times over: the writer is still writing when the
    # reader goes, as with `agent-replay project --snapshots f | head -1`.
    deltas = [{"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"}]
    deltas += [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "word "}] * 3000
    big = tmp_path / "big.jsonl"
    big.write_text("\n".join(json.dumps(c) for c in deltas), "utf-8")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_replay.cli", "project", "--snapshots", str(big)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=clean,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b'{"index":0')
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(60) == 141
    assert err == b""


def test_when_given_an_age_then_that_long_before_now() -> None:
    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert when("2d", now) == now - timedelta(days=2)
    assert when("12h", now) == now - timedelta(hours=12)
    assert when("30m", now) == now - timedelta(minutes=30)
    assert when("1w", now) == now - timedelta(weeks=1)
    assert when("90s", now) == now - timedelta(seconds=90)


def test_when_given_iso_8601_then_that_moment_in_utc_unless_an_offset_is_given() -> None:
    assert when("2026-11-30") == datetime(2026, 11, 30, tzinfo=UTC)
    assert when("2026-11-30T12:00:00Z") == datetime(2026, 11, 30, 12, tzinfo=UTC)
    later = when("2026-11-30T12:00:00+02:00")
    assert later == datetime(2026, 11, 30, 10, tzinfo=UTC)


def test_prune_when_date_unreadable_then_error_names_the_formats_it_takes() -> None:
    done = _replay("prune", "--closed-before", "last tuesday")
    err = done.stderr.decode()
    assert done.returncode == 2
    assert "ISO 8601" in err and "2d" in err and "12h" in err and "_when" not in err


@pytest.fixture(scope="module")
def home() -> Iterator[Path]:
    # Not pytest's tmp_path: a concurrent pytest resets /tmp/pytest-of-<user> to 0700, which
    # the embedded PostgreSQL's own user (when run as root) must traverse.
    with tempfile.TemporaryDirectory(prefix="replay-cli-") as path:
        yield Path(path)


@pytest.fixture(scope="module")
async def export_file(databases: Databases, home: Path) -> Path:
    url = await databases.clone()
    chunks = [json.loads(line) for line in CHUNKS.read_text("utf-8").split("\n") if line.strip()]
    chunks[0] = {**chunks[0], "threadId": "thread-cli"}
    async with EventLog.connect(url) as log:
        await log.append("cli-run-1", chunks, close=True)
    out = home / "export.jsonl"
    done = _replay("export", "--run", "cli-run-1", "--out", str(out), "--database-url", url)
    await databases.drop(url)
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode() == f"agent-replay export: wrote {len(chunks)} events to {out}\n"
    return out


def test_read_only_commands_on_the_embedded_database_when_not_verbose_then_no_logs(
    export_file: Path, home: Path
) -> None:
    data = str(home / "data")
    load = _replay("import", str(export_file), "--data-dir", data)
    assert load.returncode == 0, load.stderr
    assert load.stdout.decode().startswith("agent-replay import: 1 run imported (")
    assert load.stderr == b""

    export = _replay("export", "--run", "cli-run-1", "--data-dir", data)
    assert export.returncode == 0 and export.stderr == b""
    assert export.stdout.count(b"\n") == export_file.read_bytes().count(b"\n")

    transcript = _replay("transcript", "--thread", "thread-cli", "--data-dir", data)
    assert transcript.returncode == 0 and transcript.stderr == b""
    assert transcript.stdout.decode().startswith("# Thread thread-cli\n")

    verbose = _replay("export", "-v", "--run", "cli-run-1", "--data-dir", data)
    assert verbose.returncode == 0 and b"embedded PostgreSQL" in verbose.stderr
