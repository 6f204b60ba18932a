"""How each end reason closes a hosted run: the one table, applied to a real log."""

from __future__ import annotations

import json

import pytest

from agent_replay.agents import ENDINGS, EndReason
from agent_replay.agents.budget import exhausted
from agent_replay.agents.endings import close_run
from agent_replay.log import EventLog

EXPECTED = {
    # reason: (status, RUN_ERROR code or None, message or None)
    EndReason.FINISHED: ("finished", None, None),
    EndReason.INCOMPLETE: (
        "error", "upstream_incomplete", "the upstream stream ended without a terminal event"),
    EndReason.UPSTREAM_ERROR: ("error", "upstream_error", "upstream answered HTTP 503: busy"),
    EndReason.CANCELLED: ("cancelled", "cancelled", "the run was cancelled"),
    EndReason.ABANDONED: (
        "cancelled", "abandoned",
        "the run was cancelled: nobody was reading it (its disconnect policy)"),
    # Its message is the detail the driver or reaper gives: the budget, named.
    EndReason.BUDGET_EXHAUSTED: (
        "cancelled", "budget_exhausted", exhausted("max_events", 500)),
    EndReason.SHUTDOWN: (
        "interrupted", "interrupted", "the service shut down while it drove this run"),
    EndReason.EXPIRED: (
        "interrupted", "interrupted", "the process driving this run stopped (lease expired)"),
    EndReason.RESTARTED: (
        "interrupted", "interrupted", "the service restarted while it drove this run"),
}  # fmt: skip


def test_endings_when_listed_then_every_reason_has_exactly_one_row() -> None:
    assert set(ENDINGS) == set(EndReason) == set(EXPECTED) | {EndReason.LOST}


@pytest.mark.parametrize("reason", list(EXPECTED), ids=lambda r: r.value)
async def test_close_run_when_reason_given_then_status_code_and_message_as_the_table_says(
    event_log: EventLog, reason: EndReason
) -> None:
    run_id = f"ending-{reason.value}"
    await event_log.create_run(run_id, thread_id="t-end")
    await event_log.append(run_id, [{"type": "RUN_STARTED", "threadId": "t-end", "runId": run_id}])
    if reason is EndReason.FINISHED:
        await event_log.append(run_id, [{"type": "RUN_FINISHED", "runId": run_id}])
    status, code, message = EXPECTED[reason]
    detail = message if reason is EndReason.BUDGET_EXHAUSTED else "upstream answered HTTP 503: busy"
    await close_run(event_log, run_id, "t-end", reason, detail)
    run = await event_log.get_run(run_id)
    last = json.loads((await event_log.read_events(run_id))[-1].chunk)
    assert (run.closed, run.status) == (True, status)
    # The run row keeps the code as GET /v1/runs/{id} and the audit filter read it.
    assert run.error_code == code
    if code is None:
        assert last["type"] == "RUN_FINISHED" and run.error_message is None
    else:
        assert (last["type"], last["code"], last["message"]) == ("RUN_ERROR", code, message)
        assert (last["runId"], last["threadId"], run.error_message) == (run_id, "t-end", message)


async def test_close_run_when_lost_then_run_left_open_for_whoever_closed_it(
    event_log: EventLog,
) -> None:
    await event_log.append("ending-lost", [{"type": "RUN_STARTED"}])
    await close_run(event_log, "ending-lost", None, EndReason.LOST)
    run = await event_log.get_run("ending-lost")
    assert (run.closed, run.last_seq) == (False, 1)
