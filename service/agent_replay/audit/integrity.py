"""Verification of runs and threads against their hash chains (agent_replay.chain).

The check itself is the log's (`verify_run`: its one reader, one snapshot per run);
this names what is asked for, refuses what does not exist, and shapes the answers
the HTTP API and `agent-replay verify` give.
"""

from __future__ import annotations

from typing import Any

from agent_replay.errors import RunNotFound, ThreadNotFound
from agent_replay.log import AuditReads, check_run_id
from agent_replay.log.values import Verdict


async def verify_run(log: AuditReads, run_id: str) -> Verdict:
    """The run's verdict; RunNotFound if there is no such run."""
    verdict = await log.verify_run(check_run_id(run_id))
    if verdict is None:
        raise RunNotFound(run_id)
    return verdict


async def verify_thread(log: AuditReads, thread_id: str) -> list[Verdict]:
    """Each of the thread's runs' verdicts, oldest run first; ThreadNotFound if it has
    none. A run pruned between the listing and its check is left out."""
    records = await log.thread_records(thread_id)
    if not records:
        raise ThreadNotFound(thread_id)
    verdicts = [await log.verify_run(record.run_id) for record in records]
    return [v for v in verdicts if v is not None]


def thread_json(thread_id: str, verdicts: list[Verdict]) -> dict[str, Any]:
    """`{"thread_id", "ok", "runs": [{"run_id", "ok", "events", "head", "first_bad_seq",
    "reason"}, ...]}`: `ok` when every run is intact."""
    return {
        "thread_id": thread_id,
        "ok": all(v.ok for v in verdicts),
        "runs": [{"run_id": v.run_id, **v.to_json()} for v in verdicts],
    }
