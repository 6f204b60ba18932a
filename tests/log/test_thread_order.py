"""A thread's order never changes behind a reader: runs made at once, from two handles.

A thread's stream goes from a run to "the next run after it" as read at that
moment; a run made later that sorted before one already read would be lost to
every reader that passed it. So every answer of `thread_runs` must be a
prefix of every later one, however many runs are being made at the same time.
Without the thread's lock in `create_run` (a run stamped at its transaction's
start, committed in another order), readers see runs appear in the middle.
"""

from __future__ import annotations

import asyncio
import random
import uuid

from agent_replay.log import EventLog

ROUNDS = 8
AT_ONCE = 24


async def test_thread_runs_when_many_runs_made_at_once_from_two_handles_then_only_ever_appended(
    event_log: EventLog, database_url: str
) -> None:
    other = await EventLog.open(database_url)
    thread = f"order-{uuid.uuid4().hex[:8]}"
    rng = random.Random("thread-order")
    answers: list[list[str]] = []
    making = True

    async def read() -> None:
        while making:
            answers.append([r.run_id for r in await event_log.thread_runs(thread, None, 10_000)])

    async def make(store: EventLog, run_id: str) -> None:
        if rng.random() < 0.3:  # made by its first append, in a commit lane
            opening = {"type": "RUN_STARTED", "threadId": thread, "runId": run_id}
            await store.append(run_id, [opening])
        else:
            await store.create_run(run_id, thread_id=thread)

    readers = [asyncio.create_task(read()) for _ in range(3)]
    try:
        for round in range(ROUNDS):
            # Ids in random order, so the id cannot stand in for the creation order.
            ids = [f"{uuid.uuid4().hex[:6]}-{round}-{i}" for i in range(AT_ONCE)]
            await asyncio.gather(*(make(rng.choice([event_log, other]), r) for r in ids))
    finally:
        making = False
        await asyncio.gather(*readers)
        await other.close()
    final = [r.run_id for r in await event_log.thread_runs(thread, None, 10_000)]
    assert len(final) == ROUNDS * AT_ONCE
    assert len(answers) > ROUNDS, "the readers were meant to read while runs were made"
    for answer in answers:
        assert final[: len(answer)] == answer, "a run appeared before one already read"
