"""A thread's stream: every run of a thread, in the thread's order, each announced as soon
as it is made, and the events of every announced run as they come.

    runs of the thread, by (created_at, run_id) ──► announce R1 ─► R1's events ...
                                                    announce R2 ─► R2's events, R1's, R2's ...
                                                    (R1 closed and delivered: it leaves)

A run is announced once it is visible, whether or not the runs before it are
closed: a run accepted while an earlier one still streams is announced at
once, then both runs' events go out interleaved as they are committed (each
run's in seq order), and a run left open never holds back the runs after it.
One stream follows at most `MAX_RUNS` announced, unfinished runs at once; a
run beyond them is announced, in thread order, once one of them is over.

The cursor (`agent_replay.stream.threadcursor`) names every announced run
still followed and the last of its events sent; every frame's id is the
cursor after that frame, its own run first. With one run followed it is the
old `<run_id>:<seq>`. Resuming from it continues each listed run after its
seq (no second announcement) and announces the runs after the last one listed:
a cursor that falls between two runs, or lists several open ones, loses and
repeats nothing.

Exactly once across processes rests on the thread's order being fixed: a
store makes a thread's runs one at a time, each stamped after the one before
was visible (`LogStore.thread_runs`), so "the runs after R" read from any
snapshot never turns out later to have had another run before them. Runs are
read from the log, never taken from a notification: a notice (a run was made
on the thread, by any process), a reconnect and the slow re-check only say
*when* to read (`agent_replay.stream.hub.ThreadWatch`).

How: each followed run is tailed by its own task (`tail`, the run stream's
follower, with its channel, its catch-up reads and its end), which hands the
rows it would send to this stream's one task, a page at a time, and waits for
them to be taken. That task alone frames and sends, in the order it takes the
pages, so each frame's id is the state of the stream exactly as the client
has it. So no commit writes a thread's frames (`agent_replay.stream.outlet`):
it could not know the other runs' places.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from agent_replay.errors import (
    CursorNotInThread,
    Erased,
    OffsetOutOfRange,
    RunNotFound,
)
from agent_replay.log.chunks import storable
from agent_replay.loopevent import LoopEvent
from agent_replay.stream import sse
from agent_replay.stream.framing import Encoding, Row
from agent_replay.stream.hub import Hub
from agent_replay.stream.outlet import Outlet
from agent_replay.stream.tail import Plan, tail
from agent_replay.stream.threadcursor import (
    MAX_RUNS,
    NOW,
    Entry,
    Position,
    ThreadOffset,
    ThreadState,
    parse_cursor,
    resumed,
)
from agent_replay.tasks import stopped

# The SSE event name of a run's announcement.
ANNOUNCE_EVENT: Final = "run"
# Runs read per look at the thread when a cursor must find its last runs (`now`).
_PAGE = 100


def resolve_cursor(last_event_id: str | None, offset: str | None) -> ThreadOffset:
    """`Last-Event-ID` wins over `?offset=`; neither: from the first run."""
    if last_event_id is not None and last_event_id.strip():
        return parse_cursor(last_event_id)
    if offset is not None:
        return parse_cursor(offset)
    return ()


@dataclass(frozen=True, slots=True)
class ThreadPlan:
    thread_id: str
    # Where the stream starts; each stream moves its own copy (`follow_thread`).
    entries: tuple[Entry, ...] = ()

    def state(self) -> ThreadState:
        return ThreadState([dataclasses.replace(entry) for entry in self.entries])


async def plan_thread(hub: Hub, thread_id: str, offset: ThreadOffset) -> ThreadPlan:
    """What the request is owed, settled before any byte is sent: a cursor naming a run
    that is not the thread's is 409 cursor_not_in_thread, one past a run's last event
    409 offset_out_of_range. A thread with no run yet is no error: its stream waits."""
    hub.refuse_if_draining()
    await refuse_erased(hub, thread_id)
    if offset == NOW:
        return await _now(hub, thread_id)
    entries: list[Entry] = []
    for run_id, seq in offset:
        run = await hub.store.find_run(run_id)
        if run is None or run.thread_id != storable(thread_id):
            raise CursorNotInThread(
                f"run {run_id!r} of the cursor is not a run of thread {thread_id[:160]!r}"
            )
        if seq > run.last_seq:
            raise OffsetOutOfRange(
                f"offset {seq} is beyond run {run.run_id!r}'s last event ({run.last_seq})",
                last_seq=run.last_seq,
            )
        position = (run.created_at, run.run_id)
        entries.append(resumed(run.run_id, seq, position, run.last_seq, run.closed))
    return ThreadPlan(thread_id, tuple(entries))


async def refuse_erased(hub: Hub, thread_id: str) -> None:
    """`Erased` for an erased thread: nothing of it is read, and no run is made on it
    again, so its stream has nothing to wait for."""
    found = await hub.store.tombstones(thread_id=thread_id)
    if found:
        at = max(t.erased_at for t in found).isoformat()
        raise Erased(f"thread {thread_id[:160]!r} was erased at {at}; only its tombstones remain")


async def _now(hub: Hub, thread_id: str) -> ThreadPlan:
    """Every run as it stands delivered: only later events and runs follow. The open runs
    are followed from their last events, the latest `MAX_RUNS` of them if there are more
    (the earlier ones count as delivered)."""
    opened: collections.deque[Entry] = collections.deque(maxlen=MAX_RUNS)
    last: Entry | None = None
    position: Position | None = None
    while True:
        runs = await hub.store.thread_runs(thread_id, position, _PAGE)
        for run in runs:
            last = Entry(run.run_id, run.position, run.last_seq, run.closed, run.closed)
            if not run.closed:
                opened.append(last)
        if len(runs) < _PAGE:
            break
        position = runs[-1].position
    entries = list(opened)
    if last is not None and last.finished:
        entries = [*entries[len(entries) - MAX_RUNS + 1 :], last]
    return ThreadPlan(thread_id, tuple(entries))


def announcement(encoding: Encoding, run_id: str, cursor: str) -> bytes:
    """The frame naming a run before its first event; its id is the cursor after it."""
    data = f'{{"run_id":"{run_id}"}}'  # run ids need no JSON escape (`RUN_ID`)
    if encoding is Encoding.SSE:
        return sse.json_frame(data, id=cursor, event=ANNOUNCE_EVENT).encode()
    return f'{{"id":"{cursor}","run":{data}}}\n'.encode()


class ThreadFramer(Protocol):
    """One run's events as a thread stream frames them: each id is `<run_id>:<seq>`
    then `suffix` (the other runs' entries, as they stand when the page is framed)."""

    def frame_with(self, rows: Sequence[Row], suffix: str) -> bytes: ...


# A framer for one run's events after a seq.
FramerFor = Callable[[str, int], Awaitable[ThreadFramer]]

# A page of a run's rows, handed over; None: the run is over (or gone).
_Handed = tuple[str, list[Row] | BaseException | None, LoopEvent | None]
# What a relay gives `tail` to yield, so that it hands over each page it frames.
_PAGE_MARK: Final = b"."


class _Relay:
    """The framer a run's tail is given: it keeps the rows the tail would send (in seq
    order, a page at a time) for the thread stream's task, which frames them itself."""

    __slots__ = ("rows",)

    def __init__(self) -> None:
        self.rows: list[Row] = []

    @property
    def key(self) -> Hashable | None:
        return None  # called with every page, never a framing shared between followers

    def frame(self, rows: Sequence[Row]) -> bytes:
        self.rows.extend(rows)
        return _PAGE_MARK


async def _pump(
    hub: Hub, run_id: str, seq: int, handed: collections.deque[_Handed], wake: LoopEvent
) -> None:
    """Tail one run after `seq`, handing each page over and waiting until it is taken."""
    relay = _Relay()
    taken = LoopEvent()
    try:
        async for _ in tail(hub, Plan(run_id, seq, seq, False), relay):
            rows, relay.rows = relay.rows, []
            if not rows:
                continue
            taken.clear()
            handed.append((run_id, rows, taken))
            wake.set()
            await taken.wait()
        handed.append((run_id, None, None))
    except RunNotFound:
        # Gone before it was read (pruned, erased): the thread goes on without it.
        handed.append((run_id, None, None))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the stream's task raises it: its response fails as a run's
        handed.append((run_id, exc, None))
    wake.set()


async def follow_thread(
    hub: Hub,
    plan: ThreadPlan,
    framer_for: FramerFor,
    encoding: Encoding,
    *,
    preamble: bytes = b"",
    outlet: Outlet | None = None,
) -> AsyncIterator[bytes]:
    """The thread's runs after the cursor, each announced, and their events as they come,
    for as long as the client stays (or until the process drains, or the thread is erased).

    `outlet` is not used: a frame's id names every followed run's place, which only
    this task knows as the client has it (see the module's docstring).
    """
    del outlet
    thread_id = plan.thread_id
    state = plan.state()
    handed: collections.deque[_Handed] = collections.deque()
    wake = LoopEvent()
    framers: dict[str, ThreadFramer] = {}
    pumps: dict[str, asyncio.Task[None]] = {}

    async def start(run_id: str, seq: int) -> None:
        framers[run_id] = await framer_for(run_id, seq)
        pumps[run_id] = asyncio.create_task(
            _pump(hub, run_id, seq, handed, wake), name=f"thread-run:{run_id}"
        )

    with hub.watch_thread(thread_id, wake.set) as watch:
        try:
            if preamble:
                yield preamble
            for entry in list(state.followed()):
                await start(entry.run_id, entry.seq)
            # Whether to read the thread for runs after the last announced.
            look = True
            while True:
                wake.clear()
                # The pages handed over by now, not those handed while they go out: a run
                # that never pauses must not keep the thread from being looked at.
                for _ in range(len(handed)):
                    run_id, rows, taken = handed.popleft()
                    if isinstance(rows, BaseException):
                        raise rows
                    if rows is None:
                        state.finish(run_id)
                        del framers[run_id], pumps[run_id]
                        look = True  # a slot is free
                        continue
                    assert taken is not None
                    taken.set()
                    blob = framers[run_id].frame_with(rows, state.suffix(run_id))
                    state.deliver(run_id, rows[-1][0])
                    if blob:
                        yield blob
                if hub.draining:
                    # Ends cleanly: the client resumes from its cursor on another replica.
                    return
                if watch.woken.is_set():
                    watch.woken.clear()
                    look = True
                if look and state.slots > 0 and not state.replaying:
                    look = False
                    # After the last announced run's place, which holds even if the run
                    # is gone (pruned).
                    runs = await hub.store.thread_runs(thread_id, state.after, state.slots)
                    for run in runs:
                        cursor = state.announce(run.run_id, run.position, run.closed)
                        yield announcement(encoding, run.run_id, cursor)
                        await start(run.run_id, 0)
                        if run.closed:
                            break  # the runs after it once it is delivered (`replaying`)
                    if not runs and not pumps and await hub.store.tombstones(thread_id=thread_id):
                        # Erased while followed: no run follows, ever (new ones are refused).
                        return
                    continue
                if not handed:
                    await wake.wait()
        finally:
            await stopped(*pumps.values())
