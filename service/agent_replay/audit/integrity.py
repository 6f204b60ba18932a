"""Verification of runs and threads against their hash chains (agent_replay.chain).

The check itself is the log's (`verify_run`: its one reader, one snapshot per run);
this names what is asked for, refuses what does not exist, and shapes the answers
the HTTP API and `agent-replay verify` give. An erased run (`LogStore.erase_thread`) has no
events left to check: its verdict is `erased`, with the count and head its tombstone kept.
"""

from __future__ import annotations

from typing import Any, Protocol

from agent_replay.errors import RunNotFound, ThreadNotFound
from agent_replay.log import AuditReads, Erasure, check_run_id
from agent_replay.log.values import Tombstone, Verdict

# The reason of an erased run's verdict (agent_replay.log.integrity has the others).
ERASED = "erased"


class Verifiable(AuditReads, Erasure, Protocol):
    """What verification reads: the runs, and the tombstones of those erased."""


def erased(tombstone: Tombstone) -> Verdict:
    """An erased run's verdict: not intact (nothing is left to check), no seq to name."""
    return Verdict(tombstone.run_id, False, tombstone.events, tombstone.head, None, ERASED)


async def verify_run(log: Verifiable, run_id: str) -> Verdict:
    """The run's verdict; RunNotFound if there is no such run, nor was."""
    verdict = await log.verify_run(check_run_id(run_id))
    if verdict is not None:
        return verdict
    tombstones = await log.tombstones(run_ids=[run_id])
    if not tombstones:
        raise RunNotFound(run_id)
    return erased(tombstones[0])


async def verify_thread(log: Verifiable, thread_id: str) -> list[Verdict]:
    """Each of the thread's runs' verdicts, oldest run first (an erased thread's, in run id
    order); ThreadNotFound if it has none, nor had. A run pruned between the listing and
    its check is left out."""
    records = await log.thread_records(thread_id)
    if not records:
        tombstones = await log.tombstones(thread_id=thread_id)
        if not tombstones:
            raise ThreadNotFound(thread_id)
        return [erased(t) for t in tombstones]
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
