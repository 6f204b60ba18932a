"""Why a hosted run ended, and how each reason closes it: one table.

Every way a driven run can end is an `EndReason`; `ENDINGS` maps it to what
the log gets: no RUN_ERROR (the run's own terminal event decides its status,
or someone else already closed it), or a RUN_ERROR with its error code and
message, closing the run with a recorded status (or the one the RUN_ERROR
implies, `error`). Nowhere else spells a reason, a code or a message.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any

from agent_replay.log import Appends, Redaction


class EndReason(enum.Enum):
    FINISHED = "finished"  # the upstream ended after its own terminal event
    INCOMPLETE = "incomplete"  # the upstream ended without one
    UPSTREAM_ERROR = "upstream_error"  # refused, HTTP error, bad event, stalled, crashed
    CANCELLED = "cancelled"  # POST /v1/runs/{id}/cancel
    ABANDONED = "abandoned"  # its disconnect policy: nobody read it for long enough
    BUDGET_EXHAUSTED = "budget_exhausted"  # a ceiling of its budget (the detail names which)
    SHUTDOWN = "shutdown"  # this process stopped while driving it
    LOST = "lost"  # closed or taken over elsewhere: nothing more to write
    EXPIRED = "expired"  # reaped: its driver's process died (lease ran out)
    RESTARTED = "restarted"  # reaped at start: an earlier life of this instance drove it


@dataclass(frozen=True, slots=True)
class Ending:
    """A RUN_ERROR closing the run: `code`, `message` (None: the failure's own), `status`."""

    code: str
    message: str | None
    # Recorded instead of the status the RUN_ERROR implies (error); None keeps that.
    status: str | None


ENDINGS: dict[EndReason, Ending | None] = {
    EndReason.FINISHED: None,
    EndReason.LOST: None,
    EndReason.INCOMPLETE: Ending(
        "upstream_incomplete", "the upstream stream ended without a terminal event", None
    ),
    EndReason.UPSTREAM_ERROR: Ending("upstream_error", None, None),
    EndReason.CANCELLED: Ending("cancelled", "the run was cancelled", "cancelled"),
    EndReason.ABANDONED: Ending(
        "abandoned",
        "the run was cancelled: nobody was reading it (its disconnect policy)",
        "cancelled",
    ),
    # The message names the budget and its value: the detail (agent_replay.agents.budget).
    EndReason.BUDGET_EXHAUSTED: Ending("budget_exhausted", None, "cancelled"),
    EndReason.SHUTDOWN: Ending(
        "interrupted", "the service shut down while it drove this run", "interrupted"
    ),
    EndReason.EXPIRED: Ending(
        "interrupted", "the process driving this run stopped (lease expired)", "interrupted"
    ),
    EndReason.RESTARTED: Ending(
        "interrupted", "the service restarted while it drove this run", "interrupted"
    ),
}


def run_error(
    run_id: str, thread_id: str | None, ending: Ending, detail: str = ""
) -> dict[str, Any]:
    """The RUN_ERROR chunk for `ending`; `detail` is the failure's own message, if any."""
    message = ending.message or detail or "the upstream failed"
    chunk: dict[str, Any] = {"type": "RUN_ERROR", "runId": run_id}
    if thread_id:
        chunk["threadId"] = thread_id
    chunk.update(message=message, code=ending.code, timestamp=int(time.time() * 1000))
    return chunk


async def close_run(
    log: Appends,
    run_id: str,
    thread_id: str | None,
    reason: EndReason,
    detail: str = "",
    *,
    expected_seq: int | None = None,
    redaction: Redaction | None = None,
) -> None:
    """Close the run as `reason` says: with its RUN_ERROR (at `expected_seq`, when given),
    or (FINISHED) as it is. `redaction`: matches not counted yet (a hosted run's input,
    when its upstream sent nothing), counted by the close."""
    ending = ENDINGS[reason]
    if ending is None:
        if reason is EndReason.FINISHED:
            await log.append(run_id, [], close=True, create=False, redaction=redaction)
        return
    chunk = run_error(run_id, thread_id, ending, detail)
    await log.append(
        run_id,
        [chunk],
        expected_seq=expected_seq,
        close=True,
        close_status=ending.status,
        create=False,
        redaction=redaction,
    )
