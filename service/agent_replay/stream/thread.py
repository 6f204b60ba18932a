"""A thread's stream: every run of a thread, in the thread's order, each announced, then tailed.

    runs of the thread, by (created_at, run_id) ──► announce R1 ─► R1's events ... R1 closed
                                                    announce R2 ─► R2's events ... (waits)

One cursor, `<run_id>:<seq>`: the run being followed and the last of its
events sent (0: the run was announced, none of its events sent yet). A run
id may hold colons; a seq never does, so the cursor splits at its last colon.
Resuming from a cursor continues that run after the seq (no second
announcement), and once the run is closed and delivered, goes on with the
next run of the thread after it: a cursor after a run's last event, or at an
announcement, falls between two runs without losing or repeating either.

Exactly once across processes rests on the thread's order being fixed: a
store makes a thread's runs one at a time, each stamped after the one before
was visible (`LogStore.thread_runs`), so "the run after R" read from any
snapshot never turns out later to have had another run before it. The next
run is read from the log, never taken from a notification: a notice (a run
was made on the thread, by any process), a reconnect and the slow re-check
only say *when* to read (`agent_replay.stream.hub.ThreadWatch`).

Runs are delivered one after the other: a run made while the one before it is
still open is announced once that one is closed and delivered (a chat
thread's runs follow each other; a run left open holds back the runs after
it until it is closed, by its producer or by the reaper for hosted runs).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from agent_replay.errors import (
    CursorNotInThread,
    Erased,
    InvalidOffset,
    OffsetOutOfRange,
    RunNotFound,
)
from agent_replay.log.chunks import storable
from agent_replay.log.store import RUN_ID
from agent_replay.stream import sse
from agent_replay.stream.framing import Encoding, Framer
from agent_replay.stream.hub import Hub
from agent_replay.stream.outlet import Outlet
from agent_replay.stream.tail import NOW, Plan, tail

# The SSE event name of a run's announcement.
ANNOUNCE_EVENT: Final = "run"
_SEQ = re.compile(r"[0-9]{1,20}")
# Runs read per look at the thread when a cursor must find its last run (`now`).
_PAGE = 100


@dataclass(frozen=True, slots=True)
class ThreadCursor:
    """`run_id` None: before the thread's first run (nothing sent yet)."""

    run_id: str | None
    seq: int

    def __str__(self) -> str:
        return "-1" if self.run_id is None else format_cursor(self.run_id, self.seq)


START: Final = ThreadCursor(None, 0)
ThreadOffset = ThreadCursor | Literal["now"]


def format_cursor(run_id: str, seq: int) -> str:
    return f"{run_id}:{seq}"


def parse_cursor(text: str) -> ThreadOffset:
    """`-1` (from the first run), `now` (what comes next) or `<run_id>:<seq>`."""
    value = text.strip()
    if value == "-1":
        return START
    if value.lower() == NOW:
        return NOW
    run_id, colon, seq = value.rpartition(":")
    if colon and RUN_ID.fullmatch(run_id) and _SEQ.fullmatch(seq):
        return ThreadCursor(run_id, int(seq))
    raise InvalidOffset(
        f"thread cursor {text[:160]!r} is not -1, 'now' or <run_id>:<seq>", offset=text[:160]
    )


def resolve_cursor(last_event_id: str | None, offset: str | None) -> ThreadOffset:
    """`Last-Event-ID` wins over `?offset=`; neither: from the first run."""
    if last_event_id is not None and last_event_id.strip():
        return parse_cursor(last_event_id)
    if offset is not None:
        return parse_cursor(offset)
    return START


@dataclass(frozen=True, slots=True)
class ThreadPlan:
    thread_id: str
    cursor: ThreadCursor
    # The cursor's run's place in the thread (`ThreadRun.position`); None before the first.
    position: tuple[datetime, str] | None = None


async def plan_thread(hub: Hub, thread_id: str, offset: ThreadOffset) -> ThreadPlan:
    """What the request is owed, settled before any byte is sent: a cursor whose run is
    not the thread's is 409 cursor_not_in_thread, one past its run's last event 409
    offset_out_of_range. A thread with no run yet is no error: its stream waits."""
    hub.refuse_if_draining()
    await refuse_erased(hub, thread_id)
    if offset == NOW:
        return await _now(hub, thread_id)
    if offset.run_id is None:
        return ThreadPlan(thread_id, offset)
    run = await hub.store.find_run(offset.run_id)
    if run is None or run.thread_id != storable(thread_id):
        raise CursorNotInThread(
            f"run {offset.run_id!r} of the cursor is not a run of thread {thread_id[:160]!r}"
        )
    if offset.seq > run.last_seq:
        raise OffsetOutOfRange(
            f"offset {offset.seq} is beyond run {run.run_id!r}'s last event ({run.last_seq})",
            last_seq=run.last_seq,
        )
    return ThreadPlan(thread_id, offset, (run.created_at, run.run_id))


async def refuse_erased(hub: Hub, thread_id: str) -> None:
    """`Erased` for an erased thread: nothing of it is read, and no run is made on it
    again, so its stream has nothing to wait for."""
    found = await hub.store.tombstones(thread_id=thread_id)
    if found:
        at = max(t.erased_at for t in found).isoformat()
        raise Erased(f"thread {thread_id[:160]!r} was erased at {at}; only its tombstones remain")


async def _now(hub: Hub, thread_id: str) -> ThreadPlan:
    """At the end of the thread's last run as it stands: only later events and runs follow."""
    plan = ThreadPlan(thread_id, START)
    while True:
        runs = await hub.store.thread_runs(thread_id, plan.position, _PAGE)
        if runs:
            last = runs[-1]
            plan = ThreadPlan(thread_id, ThreadCursor(last.run_id, last.last_seq), last.position)
        if len(runs) < _PAGE:
            return plan


def announcement(encoding: Encoding, run_id: str) -> bytes:
    """The frame naming a run before its first event; its id is the cursor `<run_id>:0`."""
    data = f'{{"run_id":"{run_id}"}}'  # run ids need no JSON escape (`RUN_ID`)
    cursor = format_cursor(run_id, 0)
    if encoding is Encoding.SSE:
        return sse.json_frame(data, id=cursor, event=ANNOUNCE_EVENT).encode()
    return f'{{"id":"{cursor}","run":{data}}}\n'.encode()


# A framer for one run's events after a seq (its ids `<run_id>:<seq>`).
FramerFor = Callable[[str, int], Awaitable[Framer]]


async def follow_thread(
    hub: Hub,
    plan: ThreadPlan,
    framer_for: FramerFor,
    encoding: Encoding,
    *,
    preamble: bytes = b"",
    outlet: Outlet | None = None,
) -> AsyncIterator[bytes]:
    """The thread's runs after the cursor, each announced then tailed, for as long as the
    client stays (or until the process drains)."""
    thread_id = plan.thread_id
    run_id, seq, position = plan.cursor.run_id, plan.cursor.seq, plan.position
    if preamble:
        yield preamble
    with hub.watch_thread(thread_id) as watch:
        while True:
            if run_id is not None:
                state = (await hub.store.read_states([run_id])).get(run_id)
                if state is not None and not (state.closed and seq >= state.last_seq):
                    framer = await framer_for(run_id, seq)
                    try:
                        async for blob in tail(
                            hub,
                            Plan(run_id, seq, state.last_seq, state.closed),
                            framer,
                            outlet=outlet,
                        ):
                            yield blob
                    except RunNotFound:
                        # Pruned while followed: the thread goes on without it.
                        pass
            # The run (if any) is closed and delivered: the next one, once there is one.
            while True:
                watch.woken.clear()
                # After the run's place, which holds even if the run is gone (pruned).
                runs = await hub.store.thread_runs(thread_id, position, 1)
                if runs:
                    break
                if await hub.store.tombstones(thread_id=thread_id):
                    # Erased while followed: no run follows, ever (new ones are refused).
                    return
                if hub.draining:
                    # Ends cleanly: the client resumes from its cursor on another replica.
                    return
                await watch.woken.wait()
            run_id, seq, position = runs[0].run_id, 0, runs[0].position
            yield announcement(encoding, run_id)
