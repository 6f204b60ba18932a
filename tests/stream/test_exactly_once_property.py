"""Exactly once, in order, whatever the interleaving (hypothesis over a real database).

The hub is built with `listen=False`, so the test is the notification source:
it delivers each append's hint at once, late, twice or never, or hands the
hub that commit's rows (as the committer's `on_commit_rows` gave them) at
once, late, out of order or twice, re-checks as the periodic timer would,
pauses followers until the buffer evicts past them, and disconnects and
reconnects followers at arbitrary points. Appends and reads are real. After
the close and one re-check, every follower must have received exactly the
stored events after its offset, in order, once; with a `?types=` filter,
exactly the matching ones, resuming from the last one seen.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.log import EventLog
from agent_replay.log.typefilter import TypeFilter
from agent_replay.stream import Encoding, Hub, Limits, plan_stream, tail
from agent_replay.stream.audience import audience_framer, chunk_type
from agent_replay.stream.framing import Framer, Row
from tests.stream.wire import SseReader

DEADLINE = 10.0
KINDS = ("TEXT_MESSAGE_CONTENT", "TOOL_CALL_ARGS", "CUSTOM")
FILTERS = (None, "TEXT_MESSAGE_*", "TOOL_CALL_ARGS,CUSTOM", "CUSTOM", "NOTHING_MATCHES")


@pytest.fixture(scope="module")
async def log_and_hub(database_url: str) -> AsyncIterator[tuple[EventLog, Hub]]:
    event_log = await EventLog.open(database_url, pool_size=8)
    # Tiny pages and buffer so that page boundaries, slicing mid-batch and
    # eviction past a paused follower happen within a few dozen events.
    hub = Hub(event_log, limits=Limits(page_size=4, buffer_events=6), listen=False)
    await hub.start()
    yield event_log, hub
    await hub.stop()
    await event_log.close()


@dataclass
class Follower:
    start: int
    framer: Framer = Encoding.SSE
    reader: SseReader = field(default_factory=SseReader)
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None
    finished: bool = False

    @property
    def cursor(self) -> int:
        return self.reader.last_id or self.start

    def check_order(self) -> None:
        seqs = [seq for seq, _ in self.reader.events]
        if self.framer is Encoding.SSE:
            assert seqs == list(range(self.start + 1, self.start + 1 + len(seqs))), seqs
        else:
            assert seqs == sorted(set(seqs)) and all(s > self.start for s in seqs), seqs


async def _follow(hub: Hub, run: str, follower: Follower) -> None:
    plan = await plan_stream(hub, run, follower.cursor)
    if plan.exhausted:
        follower.finished = True
        return
    async for blob in tail(hub, plan, follower.framer):
        follower.reader.feed(blob)
        follower.check_order()
        await follower.gate.wait()
    follower.finished = True


actions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5)),
        st.tuples(st.just("deliver"), st.integers(0, 7)),
        st.tuples(st.just("duplicate"), st.integers(0, 7)),
        st.tuples(st.just("drop"), st.integers(0, 7)),
        st.tuples(st.just("offer"), st.integers(0, 7)),
        st.tuples(st.just("offer_again"), st.integers(0, 7)),
        st.tuples(st.just("reconnect"), st.integers(0, 2)),
        st.tuples(st.just("pause"), st.integers(0, 2)),
        st.tuples(st.just("resume"), st.integers(0, 2)),
        st.tuples(st.just("recheck"), st.just(0)),
        st.tuples(st.just("yield"), st.integers(1, 20)),
    ),
    max_size=40,
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=actions,
    prefix=st.integers(0, 6),
    starts=st.lists(st.integers(0, 6), min_size=1, max_size=3),
    types=st.sampled_from(FILTERS),
)
async def test_tail_when_hints_delayed_dropped_duplicated_and_reconnects_then_exactly_once(
    log_and_hub: tuple[EventLog, Hub],
    steps: list[tuple[str, int]],
    prefix: int,
    starts: list[int],
    types: str | None,
) -> None:
    event_log, hub = log_and_hub
    run = f"prop-{uuid.uuid4().hex[:10]}"
    last = 0
    # Each commit's (last_seq, closed, rows), as the committer told of it.
    pending: list[tuple[int, bool, list[Row]]] = []
    told: list[tuple[int, bool, list[Row]]] = []

    def tell(run_id: str, rows: list[Row] | None, last_seq: int, closed: bool) -> None:
        if run_id == run:
            assert rows is not None
            told.append((last_seq, closed, rows))

    async def append(n: int, close: bool = False) -> None:
        nonlocal last
        chunks = [
            {"type": KINDS[(last + i) % len(KINDS)], "delta": f"{last + i + 1}"} for i in range(n)
        ]
        result = await event_log.append(run, chunks, close=close)
        last = result.last_seq
        pending.extend(told)
        told.clear()

    remove_tell = event_log.on_commit_rows(tell)
    await append(max(prefix, 1))
    pending.clear()  # committed before anyone followed: no follower needs its hint
    type_filter = TypeFilter.parse(types) if types else None
    framer = audience_framer(Encoding.SSE, type_filter, False)
    followers = [Follower(min(start, last), framer) for start in starts]

    def begin(follower: Follower) -> None:
        follower.gate.set()
        follower.task = asyncio.create_task(_follow(hub, run, follower))

    for follower in followers:
        begin(follower)
    try:
        for action, arg in steps:
            if action == "append":
                await append(arg)
            elif action in ("deliver", "duplicate", "drop", "offer", "offer_again") and pending:
                index = arg % len(pending)
                kept = action in ("duplicate", "offer_again")
                seq, closed, rows = pending[index] if kept else pending.pop(index)
                if action in ("offer", "offer_again"):
                    hub.committed(run, rows, seq, closed)
                elif action != "drop":
                    hub.announce(run, seq, closed)
            elif action == "reconnect" and arg < len(followers):
                follower = followers[arg]
                assert follower.task is not None
                follower.task.cancel()
                await asyncio.gather(follower.task, return_exceptions=True)
                follower.reader = SseReader(
                    events=list(follower.reader.events), skipped_to=follower.reader.skipped_to
                )
                begin(follower)
            elif action == "pause" and arg < len(followers):
                followers[arg].gate.clear()
            elif action == "resume" and arg < len(followers):
                followers[arg].gate.set()
            elif action == "recheck":
                await hub.recheck()
            elif action == "yield":
                for _ in range(arg):
                    await asyncio.sleep(0)
        await append(1, close=True)
        for follower in followers:
            follower.gate.set()
        # Whatever hints were lost, the periodic re-check finds the rest.
        await hub.recheck()
        async with asyncio.timeout(DEADLINE):
            await asyncio.gather(*(f.task for f in followers if f.task is not None))
    finally:
        remove_tell()
        for follower in followers:
            if follower.task is not None:
                follower.task.cancel()
                await asyncio.gather(follower.task, return_exceptions=True)

    stored = [(e.seq, e.chunk) for e in await event_log.read_events(run, 0, 10_000)]
    if type_filter is not None:
        stored = [(seq, c) for seq, c in stored if type_filter.matches(chunk_type(c))]
    for follower in followers:
        assert follower.finished
        assert follower.reader.events == [(seq, c) for seq, c in stored if seq > follower.start]
    assert hub.stats().subscribers == 0
