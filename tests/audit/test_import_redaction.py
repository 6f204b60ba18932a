"""An import applies the importing service's redaction rules before anything is stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.ingest.imported import redact_loaded
from agent_replay.ingest.redact import Rules
from agent_replay.ingest.rules import parse_rules
from agent_replay.log.chunks import stored
from agent_replay.log.eventlog import EventLog
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord
from tests.audit.helpers import fingerprint, replay
from tests.ingest.secrets import FILLER, escaped_json, secret, splits
from tests.support.pg import Databases

RULES = Rules(parse_rules("default", "test"))
T0 = datetime(2026, 3, 1, tzinfo=UTC)
KEY = "sk-proj-" + "Q7x" * 12


def _record(run_id: str, last_seq: int, input: str | None = None) -> RunRecord:
    return RunRecord(run_id, "t", None, "succeeded", T0, T0, T0, last_seq, None, {}, input)


def _run(run_id: str, events: list[dict[str, Any]], input: str | None = None) -> LoadedRun:
    logged = [LoggedEvent(stored(e, i), T0 + timedelta(seconds=i)) for i, e in enumerate(events)]
    return LoadedRun(_record(run_id, len(logged), input), logged)


def _text_run(run_id: str, deltas: list[str], args: list[str]) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": "t", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": d} for d in deltas),
        {"type": "TEXT_MESSAGE_END", "messageId": "m"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "login"},
        *({"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": d} for d in args),
        {"type": "TOOL_CALL_END", "toolCallId": "c"},
        {"type": "RUN_FINISHED", "threadId": "t", "runId": run_id},
    ]


def _joined(run: LoadedRun, kind: str) -> str:
    return "".join(json.loads(e.chunk.text)["delta"] for e in run.events if e.chunk.type == kind)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), found=secret(), before=FILLER, after=FILLER)
def test_redact_loaded_when_secret_split_over_deltas_then_no_part_stored_and_seqs_renumbered(
    data: st.DataObject, found: tuple[str, str], before: str, after: str
) -> None:
    rule, text = found
    message = before + " " + text + " " + after
    args = escaped_json({"password": text, "note": after}, data)
    run = _run("r", _text_run("r", splits(message, data), splits(args, data)))

    [out], changed = redact_loaded([run], lambda _: RULES)

    assert changed == ["r"]
    marker = f"[REDACTED:{rule}]"
    assert _joined(out, "TEXT_MESSAGE_CONTENT") == before + " " + marker + " " + after
    assert json.loads(_joined(out, "TOOL_CALL_ARGS")) == {"password": marker, "note": after}
    assert all(text not in e.chunk.text for e in out.events)
    assert out.record.last_seq == len(out.events)
    assert out.redactions == {rule: 2}
    # Each event keeps a time of the file's, in order.
    times = [e.received_at for e in out.events]
    assert times == sorted(times) and set(times) <= {e.received_at for e in run.events}


@settings(max_examples=30, deadline=None)
@given(data=st.data(), text=FILLER)
def test_redact_loaded_when_nothing_matches_then_run_loaded_as_it_came(
    data: st.DataObject, text: str
) -> None:
    run = _run("r", _text_run("r", splits(text or "hello", data), ['{"q": 1}']), '{"a":"b"}')

    out, changed = redact_loaded([run], lambda _: RULES)

    assert out == [run] and out[0] is run and changed == []


def test_redact_loaded_when_input_holds_a_key_then_input_redacted_and_counted() -> None:
    run = _run("r", _text_run("r", ["hi"], ["{}"]), json.dumps({"messages": [KEY]}))

    [out], _ = redact_loaded([run], lambda _: RULES)

    assert json.loads(str(out.record.input)) == {"messages": ["[REDACTED:openai_key]"]}
    assert out.redactions == {"openai_key": 1}
    assert [e.chunk.text for e in out.events] == [e.chunk.text for e in run.events]


@pytest.fixture
async def two_databases(databases: Databases) -> AsyncIterator[tuple[str, str]]:
    source, target = await databases.clone(), await databases.clone()
    yield source, target
    await databases.drop(source)
    await databases.drop(target)


async def _store_unredacted(url: str) -> None:
    """A run as a service without rules stored it: the key split over three deltas."""
    log = await EventLog.open(url)
    try:
        await log.create_run("imp-1", thread_id="t")
        deltas = ["my key is sk-pr", "oj-" + "Q7x" * 6, "Q7x" * 6 + " ok"]
        await log.append("imp-1", _text_run("imp-1", deltas, ['{"k": "', KEY, '"}']), close=True)
    finally:
        await log.close()


async def test_import_when_service_has_rules_then_database_never_holds_the_key(
    two_databases: tuple[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, target = two_databases
    await _store_unredacted(source)
    export = tmp_path / "run.jsonl"
    status, _, err = await replay(
        capsys, "export", "--run", "imp-1", "--out", str(export), "--database-url", source
    )
    assert status == 0, err
    monkeypatch.setenv("REPLAY_REDACT", "default")

    status, out, err = await replay(capsys, "import", str(export), "--database-url", target)

    assert status == 0, err
    assert "redacted by REPLAY_REDACT before storing (openai_key 2)" in out
    conn = await asyncpg.connect(target)
    try:
        chunks = [r["chunk"] for r in await conn.fetch("SELECT chunk FROM events")]
        run = await conn.fetchrow("SELECT redactions::text, last_seq FROM runs")
        seqs = await conn.fetchval("SELECT array_agg(seq ORDER BY seq) FROM events")
    finally:
        await conn.close()
    stored_text = "\n".join(chunks)
    assert "Q7xQ7x" not in stored_text and "sk-pr" not in stored_text
    assert stored_text.count("[REDACTED:openai_key]") == 2
    assert json.loads(run["redactions"]) == {"openai_key": 2}
    assert seqs == list(range(1, run["last_seq"] + 1))
    # The stored run's own chain holds (it was computed over what was stored).
    status, _, err = await replay(capsys, "verify", "--run", "imp-1", "--database-url", target)
    assert status == 0, err
    # Importing the same file again finds the same run: nothing changes.
    before = await fingerprint(target)
    status, out, err = await replay(capsys, "import", str(export), "--database-url", target)
    assert status == 0, err
    assert "1 already stored and unchanged" in out
    assert await fingerprint(target) == before
