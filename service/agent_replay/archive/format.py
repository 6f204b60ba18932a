"""Writing the export format: the header line, one line per event, the signature line.

All are deterministic functions of what is stored (and of the key, for the signature), so
exporting a run, importing it elsewhere and exporting it again gives the same bytes.

Version 2 (this build writes it) puts each event's chain hash (`agent_replay.chain`) in its
line, before the chunk; version 1 files (no hash) are still read.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent_replay.log.chunks import dumps, loads
from agent_replay.log.values import RunRecord

FORMAT = "agent-replay.export"
VERSION = 2
UNCHAINED = 1  # the version before events carried their chain hash
VERSIONS = (UNCHAINED, VERSION)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def run_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent": run.agent,
        "status": run.status,
        "created_at": _iso(run.created_at),
        "updated_at": _iso(run.updated_at),
        "closed_at": _iso(run.closed_at),
        "last_seq": run.last_seq,
        "error_message": run.error_message,
        "error_code": run.error_code,
        "metadata": run.metadata,
        "input": None if run.input is None else loads(run.input),
    }


def header_line(runs: Sequence[RunRecord]) -> bytes:
    header = {"format": FORMAT, "version": VERSION, "runs": [run_json(r) for r in runs]}
    return dumps(header).encode() + b"\n"


def unchained_prefix(run_id: str, seq: int, received_at: str) -> str:
    """Everything of a version 1 event line before the chunk text."""
    return f'{{"run_id":{dumps(run_id)},"seq":{seq},"received_at":{dumps(received_at)},"chunk":'


def event_prefix(run_id: str, seq: int, received_at: str, hash_hex: str) -> str:
    """Everything of an event line before the chunk text."""
    return (
        f'{{"run_id":{dumps(run_id)},"seq":{seq},"received_at":{dumps(received_at)},'
        f'"hash":"{hash_hex}","chunk":'
    )


def event_line(run_id: str, seq: int, received_at: datetime, chain: bytes, chunk: str) -> bytes:
    """An event's line; `chain` is its hash, `chunk` its text as stored.

    The stored text is spliced in: re-encoding could change it (escapes, number spelling),
    and both the chain and the export promise the chunk exactly as stored. It comes last so
    a reader takes it as everything between `"chunk":` and the line's closing brace.
    """
    prefix = event_prefix(run_id, seq, received_at.isoformat(), chain.hex())
    return (prefix + chunk + "}\n").encode()
