"""A thread stream's cursor, and the state of delivery it names: pure, no I/O.

A thread's runs have a fixed order (`LogStore.thread_runs`). A follower
announces them in that order and delivers the events of every run it has
announced and not finished at once, each run's in seq order. What it has sent
is then exactly:

* a list of entries, each an announced run and the last of its events sent
  (0: announced, none of its events sent yet), in thread order;
* every run before the first entry, and every run between two entries that is
  not listed, finished (closed) and delivered;
* no run after the last entry announced.

A run that is finished and delivered leaves the list, unless it is the last
(which marks where the announced runs end). At most `MAX_RUNS` entries: a run
is announced only while fewer than that many announced runs are unfinished,
so the runs after wait for a slot, in thread order.

The cursor is that list as text, `<run_id>:<seq>` entries joined by `~`
(`SEPARATOR`, which no run id holds: `RUN_ID`, and which no URL or header
needs escaped), each frame's own run and seq first, then the others in thread
order: a client reads the frame's run from the first entry, and the server
orders the entries by the runs' places in the thread, whatever order they
come in. With one run listed this is the one-run cursor `<run_id>:<seq>` of
old, so a cursor given out before runs were followed side by side still means
what it meant. A run id may hold colons, a seq never does: an entry splits at
its last colon.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal

from agent_replay.errors import CursorTooLarge, InvalidOffset
from agent_replay.log.store import RUN_ID

SEPARATOR: Final = "~"
# Entries a cursor may name, and so runs announced and followed at once by one stream:
# each is a lookup before the first byte, and its text rides in every frame's id.
MAX_RUNS: Final = 32
_SEQ = re.compile(r"[0-9]{1,20}")
# The longest text `MAX_RUNS` entries can take (run ids at their longest, `RUN_ID`).
_MAX_TEXT = MAX_RUNS * (128 + 1 + 20 + 1)

# A run's place in the thread's order (`ThreadRun.position`).
Position = tuple[datetime, str]
# What a cursor names: (run id, seq) entries; none: before the thread's first run.
Entries = tuple[tuple[str, int], ...]
NOW: Final = "now"
START: Final[Entries] = ()
ThreadOffset = Entries | Literal["now"]


def format_entry(run_id: str, seq: int) -> str:
    return f"{run_id}:{seq}"


def parse_cursor(text: str) -> ThreadOffset:
    """`-1` (from the first run), `now` (what comes next) or entries `<run_id>:<seq>`
    joined by `~`: malformed is `invalid_offset`, more than `MAX_RUNS` entries (or
    more text than they can take) `cursor_too_large`, checked before anything is read."""
    value = text.strip()
    if value == "-1":
        return START
    if value.lower() == NOW:
        return NOW
    if len(value) > _MAX_TEXT or value.count(SEPARATOR) >= MAX_RUNS:
        raise CursorTooLarge(f"a thread cursor names at most {MAX_RUNS} runs", max_runs=MAX_RUNS)
    entries: list[tuple[str, int]] = []
    for part in value.split(SEPARATOR):
        run_id, colon, seq = part.rpartition(":")
        if not (colon and RUN_ID.fullmatch(run_id) and _SEQ.fullmatch(seq)):
            raise InvalidOffset(
                f"thread cursor {text[:160]!r} is not -1, 'now' or <run_id>:<seq> entries "
                f"joined by {SEPARATOR!r}",
                offset=text[:160],
            )
        entries.append((run_id, int(seq)))
    if len({run_id for run_id, _ in entries}) != len(entries):
        raise InvalidOffset(f"thread cursor {text[:160]!r} names a run twice", offset=text[:160])
    return tuple(entries)


def resumed(run_id: str, seq: int, position: Position, last_seq: int, closed: bool) -> Entry:
    """A cursor's entry, its run as the log has it (a seq already checked to be at most
    `last_seq`): finished when the run is closed and the seq is its last event's."""
    return Entry(run_id, position, seq, finished=closed and seq >= last_seq, closed=closed)


@dataclass(slots=True)
class Entry:
    """An announced run: its place, the last of its events sent, whether it is over."""

    run_id: str
    position: Position
    seq: int
    finished: bool = False
    # Closed when last looked at (its end is in the log): what the follower knows, not
    # part of the cursor.
    closed: bool = False


class ThreadState:
    """What a thread follower has sent (see the module's docstring); it moves as frames go."""

    __slots__ = ("_entries", "_max_runs")

    def __init__(self, entries: list[Entry] | None = None, max_runs: int = MAX_RUNS) -> None:
        self._max_runs = max_runs
        self._entries = sorted(entries or [], key=lambda e: e.position)
        last = self._entries[-1:]
        # A finished run leaves the list unless it is the last.
        self._entries = [e for e in self._entries[:-1] if not e.finished] + last

    @property
    def after(self) -> Position | None:
        """The last announced run's place: the runs after it are not announced yet."""
        return self._entries[-1].position if self._entries else None

    def followed(self) -> Iterator[Entry]:
        """The runs announced and not finished, in thread order."""
        return (e for e in self._entries if not e.finished)

    @property
    def replaying(self) -> bool:
        """Whether a run that was closed when announced (or resumed) is still being
        delivered: the next run is announced once it is, so a thread's history goes
        out run after run; only runs still open are followed side by side."""
        return any(e.closed and not e.finished for e in self._entries)

    @property
    def slots(self) -> int:
        """How many more runs may be announced now."""
        return self._max_runs - sum(1 for e in self._entries if not e.finished)

    def entry(self, run_id: str) -> Entry:
        for e in self._entries:
            if e.run_id == run_id:
                return e
        raise KeyError(run_id)

    def announce(self, run_id: str, position: Position, closed: bool = False) -> str:
        """The next run of the thread is announced: the announcement's id."""
        assert self.slots > 0 and (self.after is None or position > self.after)
        if self._entries and self._entries[-1].finished:
            self._entries.pop()
        self._entries.append(Entry(run_id, position, 0, closed=closed))
        return self.cursor(run_id)

    def deliver(self, run_id: str, seq: int) -> None:
        """The run's events up to `seq` were sent."""
        self.entry(run_id).seq = seq

    def finish(self, run_id: str) -> None:
        """The run is over and everything of it was sent (or it is gone)."""
        entry = self.entry(run_id)
        entry.finished = True
        if entry is not self._entries[-1]:
            self._entries.remove(entry)

    def suffix(self, run_id: str) -> str:
        """What follows the run's own entry in its frames' ids: the other listed runs."""
        return "".join(
            f"{SEPARATOR}{e.run_id}:{e.seq}" for e in self._entries if e.run_id != run_id
        )

    def cursor(self, run_id: str | None = None) -> str:
        """The cursor as text, `run_id`'s entry first (a frame of that run); `-1` if empty."""
        if not self._entries:
            return "-1"
        first = self.entry(run_id) if run_id is not None else self._entries[0]
        return format_entry(first.run_id, first.seq) + self.suffix(first.run_id)
