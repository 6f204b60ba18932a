"""Turns as renderers see them (role, heading, blocks) and the runs table's cells.

Shared by every format (`markdown`, `html`); `render` picks one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from agent_replay.log.values import RunRecord
from agent_replay.transcript.blocks import Block, Section, blocks, readable, result_ids
from agent_replay.transcript.document import Transcript


@dataclass(frozen=True, slots=True)
class TurnView:
    role: str  # user, assistant, system, run-error
    label: str
    time: datetime | None
    run_id: str
    blocks: list[Block]


def when(moment: datetime | None) -> str:
    if moment is None:
        return "time unknown"
    return moment.astimezone(UTC).isoformat(sep=" ", timespec="milliseconds")[:-6] + " UTC"


def duration(run: RunRecord) -> str:
    if run.closed_at is None:
        return "running"
    return f"{(run.closed_at - run.created_at).total_seconds():.1f} s"


RUN_COLUMNS = ("run", "agent", "status", "started", "duration", "events", "error")


def status(run: RunRecord) -> str:
    """The run's status with the code it ended in: `cancelled (abandoned)`."""
    return f"{run.status} ({run.error_code})" if run.error_code else run.status


def run_cells(run: RunRecord) -> list[str]:
    """A run's row in a transcript's runs table (RUN_COLUMNS)."""
    return [
        run.run_id,
        run.agent or "",
        status(run),
        when(run.created_at),
        duration(run),
        str(run.last_seq),
        run.error_message or "",
    ]


def views(transcript: Transcript) -> Iterator[TurnView]:
    messages = [t.message for t in transcript.turns if t.message is not None]
    shown = result_ids(messages)
    for turn in transcript.turns:
        if turn.message is None:
            error = readable(turn.error or "")
            if turn.error_code:
                error = f"{error} (code {readable(turn.error_code)})"
            body = [Block("error", "Run error", None, [Section(None, error)], error=error)]
            yield TurnView("run-error", "Run error", turn.time, turn.run_id, body)
            continue
        role = str(turn.message.get("role", "assistant"))
        parts = blocks(
            turn.message,
            shown_results=shown,
            call_times=transcript.call_times,
            result_times=transcript.result_times,
        )
        yield TurnView(role, role.capitalize(), turn.time, turn.run_id, parts)
