"""The JSON transcript: runs and turns, lossless (the messages exactly as projected)."""

from __future__ import annotations

from typing import Any

from agent_replay.archive.format import run_json
from agent_replay.projector.jsvalues import stringify
from agent_replay.transcript.document import Transcript

FORMAT = "agent-replay.transcript"


def as_json(transcript: Transcript) -> str:
    turns: list[dict[str, Any]] = []
    for turn in transcript.turns:
        item: dict[str, Any] = {
            "run_id": turn.run_id,
            "time": None if turn.time is None else turn.time.isoformat(),
        }
        if turn.message is not None:
            item["message"] = turn.message
        else:
            item["error"] = turn.error
            item["error_code"] = turn.error_code
        turns.append(item)
    document = {
        "format": FORMAT,
        "version": 1,
        "title": transcript.title,
        "runs": [run_json(run) for run in transcript.runs],
        "turns": turns,
    }
    return stringify(document) + "\n"
