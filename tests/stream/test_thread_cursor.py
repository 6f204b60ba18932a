"""The thread cursor and the state it names (`agent_replay.stream.threadcursor`), pure.

A model thread: runs made in order, events appended to any open run, runs closed
in any order. A model follower does what `follow_thread` does with a
`ThreadState` (look for runs after the last announced while a slot is free and no
closed run is being replayed, a page of a followed run's next events, a run's
end), at steps drawn between the producer's. The reader drops after any frame
and resumes from the last id it holds, as `plan_thread` does (each entry's run as
the log then has it). What the reader holds in the end must be every run
announced once in the thread's order, every event once, in seq order, after its
run's announcement, whatever the interleaving and wherever the drops fell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_replay.errors import CursorTooLarge, InvalidOffset
from agent_replay.stream.threadcursor import (
    MAX_RUNS,
    NOW,
    START,
    ThreadState,
    parse_cursor,
    resumed,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class ModelRun:
    run_id: str
    position: tuple[datetime, str]
    final: int  # events it will have
    length: int = 0
    closed: bool = False


@dataclass
class ModelLog:
    planned: list[ModelRun]
    made: int = 0

    @property
    def runs(self) -> list[ModelRun]:
        return self.planned[: self.made]

    def find(self, run_id: str) -> ModelRun:
        return next(r for r in self.runs if r.run_id == run_id)

    def after(self, position: tuple[datetime, str] | None, limit: int) -> list[ModelRun]:
        return [r for r in self.runs if position is None or r.position > position][:limit]

    def producer_moves(self) -> list[tuple[str, int]]:
        moves = [("make", 0)] if self.made < len(self.planned) else []
        for i, run in enumerate(self.runs):
            if not run.closed and run.length < run.final:
                moves.append(("append", i))
            elif not run.closed:
                moves.append(("close", i))
        return moves

    def produce(self, move: tuple[str, int]) -> None:
        kind, i = move
        if kind == "make":
            self.made += 1
        elif kind == "append":
            self.runs[i].length += 1
        else:
            self.runs[i].closed = True


Frame = tuple[str, str, int, str]  # kind, run id, seq, id


@dataclass
class ModelFollower:
    """`follow_thread`'s decisions on a `ThreadState`, without its tasks."""

    log: ModelLog
    state: ThreadState
    look: bool = True
    frames: list[Frame] = field(default_factory=list)

    def moves(self) -> list[tuple[str, str]]:
        moves: list[tuple[str, str]] = []
        if (
            self.state.slots > 0
            and not self.state.replaying
            and self.log.after(self.state.after, 1)
        ):
            moves.append(("look", ""))
        for entry in self.state.followed():
            run = self.log.find(entry.run_id)
            if entry.seq < run.length:
                moves.append(("page", entry.run_id))
            elif run.closed:
                moves.append(("end", entry.run_id))
        return moves

    def move(self, move: tuple[str, str], size: int) -> None:
        kind, run_id = move
        state = self.state
        if kind == "look":
            for run in self.log.after(state.after, state.slots):
                cursor = state.announce(run.run_id, run.position, run.closed)
                self.frames.append(("run", run.run_id, 0, cursor))
                if run.closed:
                    break
        elif kind == "page":
            entry = state.entry(run_id)
            last = min(entry.seq + size, self.log.find(run_id).length)
            suffix = state.suffix(run_id)
            for seq in range(entry.seq + 1, last + 1):
                self.frames.append(("event", run_id, seq, f"{run_id}:{seq}{suffix}"))
            state.deliver(run_id, last)
        else:
            state.finish(run_id)


def resume(log: ModelLog, cursor: str, max_runs: int) -> ThreadState:
    """`plan_thread`: each entry's run as the log has it now."""
    parsed = parse_cursor(cursor)
    assert parsed != NOW
    entries = []
    for run_id, seq in parsed:
        run = log.find(run_id)
        assert seq <= run.length
        entries.append(resumed(run_id, seq, run.position, run.length, run.closed))
    return ThreadState(entries, max_runs)


@st.composite
def threads(draw: st.DrawFn) -> ModelLog:
    count = draw(st.integers(1, 6))
    # Ids with colons and dots: an entry splits at its last colon.
    names = draw(
        st.lists(
            st.from_regex(r"[a-z][a-z0-9.:-]{0,6}", fullmatch=True),
            min_size=count,
            max_size=count,
            unique=True,
        )
    )
    planned = []
    for i, name in enumerate(names):
        # Two runs may share a creation time: the run id breaks the tie.
        at = T0 + timedelta(seconds=draw(st.integers(0, 1)) + 2 * i)
        planned.append(ModelRun(name, (at, name), draw(st.integers(0, 4))))
    planned.sort(key=lambda r: r.position)
    return ModelLog(planned)


@given(log=threads(), max_runs=st.integers(1, 3), data=st.data())
@settings(max_examples=400, deadline=None)
def test_thread_cursor_when_runs_interleave_and_reader_drops_anywhere_then_exactly_once(
    log: ModelLog, max_runs: int, data: st.DataObject
) -> None:
    held: list[Frame] = []  # what the reader has, over all its connections
    follower = ModelFollower(log, ThreadState(max_runs=max_runs))
    for _ in range(200):
        follower_moves = follower.moves()
        producer_moves = log.producer_moves()
        if not follower_moves and not producer_moves:
            break
        choice = data.draw(st.sampled_from(["follow", "produce", "drop"]))
        if choice == "produce" and producer_moves:
            log.produce(data.draw(st.sampled_from(producer_moves)))
        elif choice == "follow" and follower_moves:
            follower.move(data.draw(st.sampled_from(follower_moves)), data.draw(st.integers(1, 3)))
        elif choice == "drop":
            # The connection drops: the reader keeps the frames it got, and resumes with
            # the last id among them, on any replica (the log is the same).
            held.extend(follower.frames)
            last = held[-1][3] if held else "-1"
            follower = ModelFollower(log, resume(log, last, max_runs))
    # Everything left, and the follower drains it.
    while log.producer_moves():
        log.produce(log.producer_moves()[0])
    for _ in range(1000):
        moves = follower.moves()
        if not moves:
            break
        follower.move(moves[0], 3)
    else:
        raise AssertionError("the follower never caught up")
    held.extend(follower.frames)

    announced = [run_id for kind, run_id, _, _ in held if kind == "run"]
    assert announced == [run.run_id for run in log.planned], "each run once, in thread order"
    for run in log.planned:
        seqs = [seq for kind, run_id, seq, _ in held if kind == "event" and run_id == run.run_id]
        assert seqs == list(range(1, run.final + 1)), run.run_id
        first_event = next(
            (i for i, f in enumerate(held) if f[0] == "event" and f[1] == run.run_id), None
        )
        if first_event is not None:
            assert held.index(("run", run.run_id, 0, _id_of(held, run.run_id))) < first_event
    for _, run_id, seq, cursor in held:
        entries = parse_cursor(cursor)
        assert entries != NOW and entries[0] == (run_id, seq), "a frame's id names it first"
        assert len(entries) <= max_runs


def _id_of(held: list[Frame], run_id: str) -> str:
    return next(f[3] for f in held if f[0] == "run" and f[1] == run_id)


def test_thread_cursor_when_one_run_is_followed_then_it_is_the_old_run_and_seq() -> None:
    state = ThreadState()
    at = (T0, "a:b")
    assert state.announce("a:b", at) == "a:b:0"
    state.deliver("a:b", 7)
    assert state.cursor("a:b") == "a:b:7"
    assert parse_cursor("a:b:7") == (("a:b", 7),)


def test_thread_cursor_when_a_run_ends_then_it_leaves_unless_last() -> None:
    state = ThreadState()
    state.announce("r1", (T0, "r1"))
    state.announce("r2", (T0 + timedelta(seconds=1), "r2"))
    state.deliver("r2", 3)
    assert state.cursor("r2") == "r2:3~r1:0"
    state.finish("r2")  # the last: it stays, marking where announced runs end
    assert state.cursor() == "r1:0~r2:3"
    state.finish("r1")
    assert state.cursor() == "r2:3"
    assert state.slots == MAX_RUNS


@pytest.mark.parametrize(
    "text",
    ["nonsense", "r", "r:", "r:x", ":1", "r:1~", "~r:1", "r:1~~s:2", "r:1 ~s:2", "r:1~r:2"],
)
def test_thread_cursor_when_malformed_then_invalid_offset(text: str) -> None:
    with pytest.raises(InvalidOffset):
        parse_cursor(text)


def test_thread_cursor_when_more_entries_than_runs_followed_then_too_large() -> None:
    fits = "~".join(f"r{i}:1" for i in range(MAX_RUNS))
    assert len(parse_cursor(fits)) == MAX_RUNS
    with pytest.raises(CursorTooLarge):
        parse_cursor(fits + "~more:1")
    with pytest.raises(CursorTooLarge):
        parse_cursor("r" * 10_000 + ":1")


def test_thread_cursor_when_minus_one_or_now_then_start_or_now() -> None:
    assert parse_cursor(" -1 ") == START
    assert parse_cursor("NOW") == NOW
