"""One group commit, typed: what the append statement is sent, and what each append gets back.

The append statement (`queries.sql`: `append`, and `append_ones` for a group of
tokens) takes a group as typed parts, each defined once here:

* `RunShare`: a run's share of the group (how many events, the seq they must
  start at, whether it closes, its summary). A plain share (a count, at most an
  expected seq) goes with the others' counts; any other as one JSON object keyed
  by run id (`$3`; the statement looks each run's share up from its row, so it
  needs no join). `RunShare.to_json` is the only writer of that object.
* `EventRows`: the rows of events, a row per event or per batch
  (agent_replay.log.rows), sent as one JSON array (`$1`, with the batch rows'
  chunks apart: `$2`); a group of one chunk for each of several runs that
  records nothing but tools sends them as columns of delimited text instead
  (`append_ones`, `ones_columns`).
* `Pending`: one producer's append, waiting for its group.

`Group.statement` is the one place a group's statement and its parameters are made.
Settlement is pure: `settle` turns the statement's answer (each applied run's
base seq) into every append's outcome, and `explain` does the same for the
runs it refused, given their states. Neither touches the database; the writer
(`agent_replay.log.writer`) only runs statements and applies `Outcomes`; taking a
group from the queue (`take`) is pure too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import repeat
from operator import attrgetter
from typing import Any

import orjson

from agent_replay.errors import (
    ProducerRefused,
    RedactionConflict,
    ReplayError,
    RunClosed,
    RunNotFound,
    SeqConflict,
)
from agent_replay.log import rows as layout
from agent_replay.log import sql
from agent_replay.log.chunks import Chunks, loads, storable, text_at, types_of
from agent_replay.log.summary import (
    SUMMARIZED,
    TOKEN_COLUMNS,
    adds_to_summary,
    summarize_parts,
    tool_name,
)
from agent_replay.log.values import AppendResult, Redaction, RunState, StoredChunk


@dataclass(slots=True)
class Pending:
    """One producer's append, queued until a commit lane takes it into a group."""

    run_id: str
    chunks: Sequence[StoredChunk]
    expected_seq: int | None
    close: bool
    create: bool
    # With close: the status to record instead of finished/error (cancelled, interrupted).
    close_status: str | None
    future: asyncio.Future[AppendResult] = field(repr=False)
    # Only into the run created at this time: a caller that remembers a run (a
    # Durable Stream's name) finds out in the same statement that it was
    # deleted and made again, instead of reading the run first.
    created_at: datetime | None = None
    # (producer id, epoch, seq): appended only if that idempotent producer's stored
    # state admits it, recorded in the same statement (see `ProducerRefused`).
    producer: tuple[str, int, int] | None = None
    # Redaction's counts, and its guarded hold, written in the same statement.
    redaction: Redaction | None = None

    @property
    def ends_group(self) -> bool:
        """Whether a later append of the same run may join this one's group."""
        return (
            self.expected_seq is not None
            or self.close
            or self.producer is not None
            or self.redaction is not None
        )


# An AppendResult made directly: a named tuple's own constructor is a Python call, and
# settling makes one per append.
_new_result = tuple.__new__

_NO_USAGE = (None, None, None)


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and a
# share is made per run per group commit.
@dataclass(slots=True)
class RunShare:
    """A run's share of one group, as the append statement reads it."""

    count: int
    expected: int | None = None
    close: bool = False
    status: str | None = None  # with close: recorded instead of finished / error
    terminal: str | None = None  # the last RUN_FINISHED / RUN_ERROR type
    error: str | None = None  # that RUN_ERROR's text
    error_code: str | None = None  # and its code
    tools: tuple[str, ...] = ()
    # Summed into prompt_tokens, completion_tokens, total_tokens.
    usage: tuple[int | None, int | None, int | None] = (None, None, None)
    # The run's created_at every append of the share expects (`Pending.created_at`).
    born: datetime | None = None
    # The share's one append's producer (`Pending.producer`).
    producer: tuple[str, int, int] | None = None
    # The share's one append's redaction (`Pending.redaction`): an append carrying one
    # is alone in its run's share (`take`).
    redaction: Redaction | None = None

    @classmethod
    def of(cls, items: list[Pending]) -> RunShare:
        """The share of a run's appends in one group (they commit as one)."""
        head = items[0]
        if (
            len(items) == 1
            and not head.close
            and head.created_at is None
            and head.producer is None
            and head.redaction is None
            and not adds_to_summary(head.chunks)
        ):
            # Most shares of a busy log's groups: one append with nothing to record.
            return cls(len(head.chunks), head.expected_seq)
        last = items[-1]
        share = cls.of_parts(
            [item.chunks for item in items],
            expected=items[0].expected_seq,
            close=last.close,
            status=last.close_status if last.close else None,
        )
        if head.created_at is None and head.producer is None and head.redaction is None:
            return share
        return replace(
            share, born=head.created_at, producer=head.producer, redaction=head.redaction
        )

    @classmethod
    def called(cls, tool: str | None, expected: int | None = None) -> RunShare:
        """The share of one TOOL_CALL_START naming `tool` (None: it names none), alone."""
        return cls(1, expected, tools=() if tool is None else (tool,))

    @classmethod
    def of_chunks(
        cls,
        chunks: Sequence[StoredChunk],
        *,
        expected: int | None = None,
        close: bool = False,
    ) -> RunShare:
        return cls.of_parts([chunks], expected=expected, close=close)

    @classmethod
    def of_parts(
        cls,
        parts: Sequence[Sequence[StoredChunk]],
        *,
        expected: int | None = None,
        close: bool = False,
        status: str | None = None,
    ) -> RunShare:
        """The share of these chunks, given as its appends' lists in order."""
        count = sum(map(len, parts))
        if not any(map(adds_to_summary, parts)):
            # A share per run per group commit: the common one without a Summary.
            return cls(count=count, expected=expected, close=close, status=status)
        summary = summarize_parts(parts)
        return cls(
            count=count,
            expected=expected,
            close=close,
            status=status,
            terminal=summary.terminal,
            error=summary.error if summary.terminal is not None else None,
            error_code=summary.error_code if summary.terminal is not None else None,
            tools=tuple(summary.tools),
            usage=(summary.usage[0], summary.usage[1], summary.usage[2]),
        )

    @property
    def plain(self) -> bool:
        """Whether `to_json` holds nothing but the count and the expected seq (`append`
        then takes it with the plain shares), told from the fields without building it."""
        return not self.tools and self.tools_at_most

    @property
    def tools_at_most(self) -> bool:
        """Whether `to_json` holds nothing but the count, the expected seq and the tools
        called (what `append_ones` takes)."""
        return (
            not self.close
            and self.terminal is None
            and self.usage == _NO_USAGE
            and self.born is None
            and self.producer is None
            and self.redaction is None
        )

    def to_json(self) -> dict[str, Any]:
        """The statement's form: absent keys mean "no", "none" or "unchanged"."""
        share: dict[str, Any] = {"n": self.count}
        if self.expected is not None:
            share["expected"] = self.expected
        if self.close:
            share["close"] = True
            if self.status is not None:
                share["status"] = self.status
        if self.terminal is not None:
            share["terminal"] = self.terminal
            if self.error is not None:
                share["error"] = self.error
            if self.error_code is not None:
                share["error_code"] = self.error_code
        if self.tools:
            share["tools"] = list(self.tools)
        for column, value in zip(TOKEN_COLUMNS, self.usage, strict=True):
            if value is not None:
                share[column] = value
        if self.born is not None:
            share["born"] = self.born.isoformat()
        if self.producer is not None:
            share["producer"] = list(self.producer)
        redaction = self.redaction
        if redaction is not None:
            if redaction.counts:
                share["redactions"] = dict(redaction.counts)
            read = redaction.read
            if read is not None:
                # The guard: the run as the hold was read (`was` absent: none held).
                share["at"] = read.last_seq
                if read.hold is not None:
                    share["was"] = read.hold
                if redaction.hold is not None:
                    share["hold"] = redaction.hold
        return share


# The share of one chunk with nothing to record: shares are values, never changed once
# made (a share with more is a new one, `replace`), so the most common one is shared.
_ONE = RunShare(1)


# Named reads of a chunk's columns, at C speed (the hot loop of big batches).
_TYPE = attrgetter("type")
_TEXT = attrgetter("text")
_MESSAGE_ID = attrgetter("message_id")
_TOOL_CALL_ID = attrgetter("tool_call_id")


# One `events` row as a group sends it: run_id, ord, type, chunk, message_id,
# tool_call_id, n (the `events` columns, without the seq's base and the month).
EventRow = tuple[str, int, str, str, str | None, str | None, int]


@dataclass(slots=True)
class EventRows:
    """A group's `events` rows; `ord` counts from 1 within each run (a batch row's is
    its last event's, see agent_replay.log.rows)."""

    rows: list[EventRow] = field(default_factory=list)
    events: int = 0
    # A run's share of at least this many chunks shares rows; None: a row per event.
    batch_min: int | None = layout.BATCH_MIN
    # Where in `rows` the batch rows are (their chunks go to the statement apart).
    batched: list[int] = field(default_factory=list)

    def add(self, run_id: str, chunks: Sequence[StoredChunk], after: int) -> None:
        """`chunks` of `run_id`, numbered `after + 1 ...` within the run's share."""
        count = len(chunks)
        self.events += count
        if count == 1 and type(chunks) is list and (self.batch_min is None or self.batch_min > 1):
            # One chunk (a token of a run): a row of its own, made directly.
            kind, text, message_id, tool_call_id = chunks[0]
            self.rows.append((run_id, after + 1, kind, text, message_id, tool_call_id, 1))
            return
        batches = None if self.batch_min is None else layout.packed(chunks, self.batch_min)
        if batches is not None:
            self.batched.extend(range(len(self.rows), len(self.rows) + len(batches)))
            self.rows.extend(
                (run_id, after + last, kind, text, None, None, n) for last, n, kind, text in batches
            )
            return
        if type(chunks) is Chunks:
            chunks = list(chunks)  # a tuple each: their ids read once, for all of them
        self.rows.extend(
            zip(
                repeat(run_id, count),
                range(after + 1, after + count + 1),
                map(_TYPE, chunks),
                map(_TEXT, chunks),
                map(_MESSAGE_ID, chunks),
                map(_TOOL_CALL_ID, chunks),
                repeat(1, count),
                strict=True,
            )
        )

    def __len__(self) -> int:
        """The events (not the rows) these rows hold."""
        return self.events

    def params(self) -> tuple[str, list[str] | None]:
        """`append`'s $1-$2: the rows as a JSON array of arrays, each batch row's chunk
        replaced by its place (from 1) in the second, the batch rows' chunks (see
        `queries.sql`: a large text inside the JSON costs both sides its escapes).
        Without batch rows the second is null, not empty: an empty array cost the
        database more per group (its statement variants on one connection)."""
        if not self.batched:
            return orjson.dumps(self.rows).decode(), None
        rows: list[Any] = list(self.rows)
        texts = []
        for place, index in enumerate(self.batched, start=1):
            run_id, ord_, kind, text, _, _, n = rows[index]
            rows[index] = (run_id, ord_, kind, None, None, None, n, place)
            texts.append(text)
        return orjson.dumps(rows).decode(), texts


@dataclass(frozen=True, slots=True)
class Group:
    """What one group commit sends: each run's share and all the events."""

    shares: dict[str, RunShare]
    events: EventRows

    @classmethod
    def one(
        cls,
        run_id: str,
        chunks: Sequence[StoredChunk],
        *,
        close: bool = False,
        batch_min: int | None = layout.BATCH_MIN,
        redaction: Redaction | None = None,
    ) -> Group:
        """A group of one run's chunks (for a caller holding its own transaction)."""
        events = EventRows(batch_min=batch_min)
        events.add(run_id, list(chunks), 0)
        share = RunShare.of_chunks(chunks, close=close)
        if redaction is not None:
            share = replace(share, redaction=redaction)
        return cls({run_id: share}, events)

    @classmethod
    def of(
        cls, appends: Mapping[str, list[Pending]], batch_min: int | None = layout.BATCH_MIN
    ) -> Group:
        shares: dict[str, RunShare] = {}
        events = EventRows(batch_min=batch_min)
        rows = events.rows
        one_row = batch_min is None or batch_min > 1
        for run, items in appends.items():
            item = items[0]
            chunks = item.chunks
            if (
                one_row
                and len(items) == 1
                and type(chunks) is list
                and len(chunks) == 1
                and not item.close
                and item.created_at is None
                and item.producer is None
                and item.redaction is None
            ):
                # Most shares of a busy log's groups: one token of a run. Its row and
                # share are made here (`EventRows.add`'s and `RunShare.of`'s own paths
                # for it), not through two calls and a summary.
                kind, text, message_id, tool_call_id = chunks[0]
                if kind not in SUMMARIZED:
                    rows.append((run, 1, kind, text, message_id, tool_call_id, 1))
                    events.events += 1
                    expected = item.expected_seq
                    shares[run] = _ONE if expected is None else RunShare(1, expected)
                    continue
                if kind == "TOOL_CALL_START":
                    # About one token in forty: the tool it names read straight from its
                    # text, not through a whole summary.
                    rows.append((run, 1, kind, text, message_id, tool_call_id, 1))
                    events.events += 1
                    shares[run] = RunShare.called(tool_name(loads(text)), item.expected_seq)
                    continue
            n = 0
            for item in items:
                if item.chunks:
                    events.add(run, item.chunks, n)
                    n += len(item.chunks)
            shares[run] = RunShare.of(items)
        return cls(shares, events)

    def statement(self, process: str = "") -> tuple[str, tuple[Any, ...]]:
        """The append statement this group takes (`queries.sql`) with all its parameters:
        `append_ones` when each of several runs brings one chunk and nothing to record
        but the tool it called, else `append`. `process`: the committing process's key,
        as its listener registered it; the statement notifies (but for a close) only
        when another process listens (the default, no process's, counts every one)."""
        events = self.events
        shares = self.shares
        if (
            len(events.rows) == events.events == len(shares) > 1
            and not events.batched
            and all(share.count == 1 and share.tools_at_most for share in shares.values())
            and (columns := ones_columns(events.rows)) is not None
        ):
            return sql.APPEND_ONES, (
                *columns,
                _json({run: s.expected for run, s in shares.items() if s.expected is not None}),
                _json({run: list(s.tools) for run, s in shares.items() if s.tools}),
                process,
            )
        return self.general(process)

    def general(self, process: str = "") -> tuple[str, tuple[Any, ...]]:
        """`append`, which takes any group, with all its parameters."""
        shares = self.shares
        # $3-$7: the shares with something to record as the statement's JSON requests
        # (`to_json`), the plain ones (a count, at most an expected seq) apart.
        rich = {run: share.to_json() for run, share in shares.items() if not share.plain}
        plain = [run for run, share in shares.items() if share.plain]
        counts = {run: shares[run].count for run in plain}
        expected = {run: shares[run].expected for run in plain if shares[run].expected is not None}
        return sql.APPEND, (
            *self.events.params(),
            _json(rich),
            list(rich),
            _json(counts),
            plain,
            _json(expected),
            process,
        )


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


# `append_ones`' columns: values joined by a separator, a null in the two that may be
# null as a value of its own; neither is ever raw in a chunk's JSON text.
_SEPARATOR = "\x1e"
_NULL = "\x1f"


def ones_columns(rows: list[EventRow]) -> tuple[str, str, str, str, str] | None:
    """`append_ones`' $1-$5 for these rows (one event each), or None where a value holds
    the separator or the null (a type or an id may: any string is one), so that the
    group takes `append`."""
    count = len(rows)
    run_ids, _, types, texts, message_ids, tool_call_ids, _ = zip(*rows, strict=True)
    joined = []
    for column in (run_ids, types, texts):
        text = _SEPARATOR.join(column)
        if text.count(_SEPARATOR) != count - 1:
            return None
        joined.append(text)
    for nullable in (message_ids, tool_call_ids):
        nulls = nullable.count(None)
        text = _SEPARATOR.join([_NULL if value is None else value for value in nullable])
        if text.count(_SEPARATOR) != count - 1 or text.count(_NULL) != nulls:
            return None
        joined.append(text)
    return joined[0], joined[1], joined[2], joined[3], joined[4]


def take(
    queue: Iterable[Pending], blocked: set[str], max_events: int
) -> tuple[dict[str, list[Pending]], list[Pending], int]:
    """What a commit lane takes from `queue`: its group (the appends by run, in order),
    the appends it leaves queued, and their chunks. `blocked` (changed here): the runs
    another lane has in flight. A withdrawn append (its future done: its producer
    stopped waiting) is dropped, never stored; a run's later appends wait once one is
    left, or once one ends its share (see `Pending.ends_group`), and so does an append
    that would take the group past `max_events` (but for the first), or one that states
    its own expected seq, producer or another run life than the run's first in the
    group."""
    group: dict[str, list[Pending]] = {}
    kept: list[Pending] = []
    size = kept_size = 0
    for item in queue:
        if item.future.done():
            continue  # its producer stopped waiting (timed out): never stored
        run = item.run_id
        taken = group.get(run)
        if (
            run in blocked
            or (size and size + len(item.chunks) > max_events)
            or (
                taken is not None
                and (
                    item.expected_seq is not None
                    or item.producer is not None
                    or item.redaction is not None
                    or item.created_at != taken[0].created_at
                )
            )
        ):
            kept.append(item)
            kept_size += len(item.chunks)
            blocked.add(run)
            continue
        group.setdefault(run, []).append(item)
        size += len(item.chunks)
        if item.ends_group:
            blocked.add(run)
    return group, kept, kept_size


@dataclass(slots=True)
class Outcomes:
    """What a group's appends get: for the writer to apply, in this order."""

    # (run_id, last_seq, closed) per run the group changed: told before acknowledging.
    hints: list[tuple[str, int, bool]] = field(default_factory=list)
    results: list[tuple[Pending, AppendResult]] = field(default_factory=list)
    errors: list[tuple[Pending, ReplayError]] = field(default_factory=list)
    # Runs to create ({run_id: thread_id}) before their appends are tried again.
    create: dict[str, str | None] = field(default_factory=dict)
    # Tried again, at the front of the queue, in this order.
    retry: list[Pending] = field(default_factory=list)
    committed: int = 0  # events this group added


def settle(
    appends: Mapping[str, list[Pending]], bases: Mapping[str, int]
) -> tuple[Outcomes, dict[str, list[Pending]]]:
    """Outcomes of the runs the statement applied (`bases`: run -> seq before the group),
    and the runs it refused, still to be explained: each applied run's appends numbered
    from its base, and the run's hint (its new last seq, whether its last append closed
    it)."""
    outcomes = Outcomes()
    refused: dict[str, list[Pending]] = {}
    hint = outcomes.hints.append
    result = outcomes.results.append
    committed = 0
    for run, items in appends.items():
        base = bases.get(run)
        if base is None:
            refused[run] = items
            continue
        start = base
        for item in items:
            count = len(item.chunks)
            result(
                (item, _new_result(AppendResult, (run, base + 1 if count else None, base + count)))
            )
            base += count
        committed += base - start
        hint((run, base, items[-1].close))
    outcomes.committed = committed
    return outcomes, refused


def explain(
    refused: Mapping[str, list[Pending]],
    states: Mapping[str, RunState],
    already_stored: Iterable[str] = (),
) -> Outcomes:
    """Outcomes of appends the statement did not apply: missing, closed or misfit runs.

    `states` holds the refused runs that exist; `already_stored` the runs whose
    first append (carrying `expected_seq`) is stored exactly at that seq
    already, i.e. a retry, answered as the first time.
    """
    outcomes = Outcomes()
    stored = set(already_stored)
    for run, items in refused.items():
        state = states.get(run)
        born = items[0].created_at
        if items[0].producer is not None:
            # Its answer (duplicate, gap, fenced, closed, gone) is the guarded append's.
            outcomes.errors.extend((item, ProducerRefused(run)) for item in items)
            continue
        if state is not None and born is not None and state.created_at != born:
            # Deleted and made again since the caller saw it: not the run it named.
            outcomes.errors.extend((item, RunNotFound(run)) for item in items)
            continue
        if state is None:
            if all(item.create for item in items):
                outcomes.create[run] = thread_of(items[0].chunks)
                outcomes.retry.extend(items)
            else:
                outcomes.errors.extend((item, RunNotFound(run)) for item in items)
            continue
        head = items[0]
        guarded = head.redaction is not None and head.redaction.read is not None
        if head.expected_seq is not None:
            # A group holds one append with expected_seq per run, and it heads its share.
            count = len(head.chunks)
            if run in stored and count:
                first = head.expected_seq
                outcomes.results.append((head, AppendResult(run, first, first + count - 1)))
            elif state.closed:
                outcomes.errors.append((head, RunClosed(run, state.last_seq)))
            elif guarded and state.last_seq == head.expected_seq - 1:
                # At the seq expected, but its hold moved (an append that stored
                # nothing but held text): redacted again from the hold as it is now.
                outcomes.errors.append((head, RedactionConflict(run, state.last_seq)))
            else:
                outcomes.errors.append((head, SeqConflict(run, head.expected_seq, state.last_seq)))
            continue
        if state.closed:
            for item in items:
                if item.close and not item.chunks:
                    # Closing a closed run is a no-op, not an error.
                    outcomes.results.append((item, AppendResult(run, None, state.last_seq)))
                else:
                    outcomes.errors.append((item, RunClosed(run, state.last_seq)))
            continue
        if guarded:
            # Another append moved the run or its hold since it was read: what this one
            # holds and releases must be redacted again from the run as it is now.
            outcomes.errors.extend((item, RedactionConflict(run, state.last_seq)) for item in items)
            continue
        # Open, no expectation, yet not applied: it was closed or created
        # between our read and the statement. Try again.
        outcomes.retry.extend(items)
    return outcomes


def thread_of(chunks: Sequence[StoredChunk]) -> str | None:
    """The first RUN_STARTED chunk's threadId: a run created by its first append takes it."""
    types = types_of(chunks)
    if "RUN_STARTED" not in types:
        return None
    thread = loads(text_at(chunks, types.index("RUN_STARTED"))).get("threadId")
    return storable(thread) if isinstance(thread, str) else None
