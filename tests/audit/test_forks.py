"""A fork of a fork, read wherever the audit and the archive read a run: its events are
its source's up to the fork point (a batch row cut in its middle, in the batch layout),
then its own. The oracle is the list of chunks each run was given, in both row layouts."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import orjson
import pytest

from agent_replay.archive.dump import export_bytes, run_records
from agent_replay.audit.cache import StoredRun, run_projection
from agent_replay.audit.projection import PROJECTOR_VERSION, messages_json, project_run
from agent_replay.log import EventLog
from agent_replay.log.filters import EventFilter
from agent_replay.log.streams import JSON_TYPE, NewStream, StreamStore
from agent_replay.log.typefilter import TypeFilter

THREAD = "t-forks"


def _text(message: str, delta: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": delta}


def _end(message: str) -> dict[str, Any]:
    return {"type": "TEXT_MESSAGE_END", "messageId": message}


def _source(run_id: str) -> list[dict[str, Any]]:
    return [
        {"type": "RUN_STARTED", "threadId": THREAD, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        *(_text("m1", f"s{seq} ") for seq in range(3, 10)),
        _end("m1"),
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "look"},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
    ]


class Runs:
    def __init__(self, log: EventLog, prefix: str) -> None:
        self.log = log
        self.source, self.fork, self.grandchild = (f"{prefix}-{n}" for n in ("src", "a", "b"))
        self.chunks: dict[str, list[dict[str, Any]]] = {}

    async def make(self) -> None:
        source = _source(self.source)
        # Seqs 1-10 in one append (one batch row where the layout batches), 11 and 12 alone.
        await self.log.append(self.source, source[:10])
        for chunk in source[10:]:
            await self.log.append(self.source, [chunk])
        # A fork at 6, inside that batch row: 7-11 in one append, 12 alone.
        mine = [_text("m1", f"a{seq} ") for seq in range(7, 12)]
        await self._fork(self.fork, self.source, 6)
        await self.log.append(self.fork, mine)
        await self.log.append(self.fork, [_end("m1")])
        # Its fork at 9, inside the fork's own batch row.
        await self._fork(self.grandchild, self.fork, 9)
        for chunk in (_text("m1", "b10"), _end("m1")):
            await self.log.append(self.grandchild, [chunk])
        self.chunks = {
            self.source: source,
            self.fork: [*source[:6], *mine, _end("m1")],
            self.grandchild: [*source[:6], *mine[:3], _text("m1", "b10"), _end("m1")],
        }

    async def _fork(self, name: str, source: str, at: int) -> None:
        new = NewStream(
            name=name,
            content_type=JSON_TYPE,
            ttl_seconds=None,
            expires_at=None,
            closed=False,
            fork_spec=orjson.dumps([source, at]).decode(),
            fork_source_run=source,
            fork_seq=at,
            deletable=False,
        )
        _, created = await StreamStore(self.log).create(new, [])
        assert created


@pytest.fixture(params=[4, None], ids=["batch-rows", "row-per-event"])
async def runs(database_url: str, request: pytest.FixtureRequest) -> AsyncIterator[Runs]:
    async with EventLog.connect(database_url, batch_min=request.param) as log:
        made = Runs(log, f"fk-{uuid.uuid4().hex[:12]}")
        await made.make()
        yield made


def _parsed(events: list[Any]) -> list[tuple[int, Any]]:
    return [(e.seq, orjson.loads(e.chunk)) for e in events]


async def test_read_events_when_a_fork_of_a_fork_then_prefix_then_own_from_every_cursor(
    runs: Runs,
) -> None:
    for run_id, chunks in runs.chunks.items():
        numbered = list(enumerate(chunks, 1))
        for after in range(len(chunks) + 1):
            for limit in (1, 4, 100):
                got = await runs.log.read_events(run_id, after, limit)
                assert _parsed(got) == numbered[after : after + limit], (run_id, after, limit)


@pytest.mark.parametrize(
    "event_filter",
    [
        EventFilter(types=("TEXT_MESSAGE_CONTENT",)),
        EventFilter(patterns=TypeFilter.parse("TEXT_MESSAGE_E*,RUN_STARTED")),
        EventFilter(types=("TOOL_CALL_END", "TEXT_MESSAGE_END")),
    ],
    ids=["type", "patterns", "types"],
)
async def test_read_filtered_when_a_fork_then_what_passes_in_seq_order_at_every_page_size(
    runs: Runs, event_filter: EventFilter
) -> None:
    def passes(chunk: dict[str, Any]) -> bool:
        kinds = set(event_filter.types) or {chunk["type"]}
        patterns = event_filter.patterns
        return chunk["type"] in kinds and (patterns is None or patterns.matches(chunk["type"]))

    for run_id, chunks in runs.chunks.items():
        wanted = [(seq, c) for seq, c in enumerate(chunks, 1) if passes(c)]
        assert wanted, run_id  # the filter keeps something of each run
        for limit in (1, 2, 100):
            for after in range(len(chunks) + 1):
                got = await runs.log.read_filtered(run_id, event_filter, after, limit)
                expected = [(s, c) for s, c in wanted if s > after][:limit]
                assert _parsed(got) == expected, (run_id, after, limit)


async def test_read_filtered_when_received_bounds_then_the_fork_own_events_or_its_prefix(
    runs: Runs,
) -> None:
    run_id = runs.grandchild
    # The grandchild's own two events were appended after everything it inherits.
    own_first = (await runs.log.read_events(run_id, 9, 1))[0].received_at
    later = EventFilter(types=("TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"))
    only_own = EventFilter(later.types, received_after=own_first)
    got = await runs.log.read_filtered(run_id, only_own, 0, 100)
    assert [e.seq for e in got] == [10, 11]
    before = EventFilter(later.types, received_before=own_first)
    got = await runs.log.read_filtered(run_id, before, 0, 100)
    assert [e.seq for e in got] == [3, 4, 5, 6, 7, 8, 9]
    nothing = EventFilter(later.types, received_after=own_first + timedelta(days=1))
    assert await runs.log.read_filtered(run_id, nothing, 0, 100) == []


async def test_export_when_a_fork_of_a_fork_then_every_event_once_as_given(runs: Runs) -> None:
    for run_id, chunks in runs.chunks.items():
        data = await export_bytes(runs.log, await run_records(runs.log, run_id=run_id))
        lines = [orjson.loads(line) for line in data.splitlines()]
        assert [r["run_id"] for r in lines[0]["runs"]] == [run_id]
        assert [(e["seq"], e["chunk"]) for e in lines[1:]] == list(enumerate(chunks, 1))


async def test_projection_when_a_fork_then_as_projecting_the_chunks_it_was_given(
    runs: Runs,
) -> None:
    for run_id, chunks in runs.chunks.items():
        texts = [orjson.dumps(c).decode() for c in chunks]
        run = await runs.log.get_run(run_id)
        for at in (5, 8, 10, len(chunks)):
            got = await run_projection(runs.log, StoredRun(run_id, run.last_seq, run.closed), at=at)
            expected = messages_json(project_run(run_id, texts[:at], finalize=False))
            assert orjson.loads(got.messages) == orjson.loads(expected), (run_id, at)
    # Closed: projected whole, finalized, and cached as such.
    for run_id, chunks in runs.chunks.items():
        await runs.log.close_run(run_id)
        run = await runs.log.get_run(run_id)
        got = await run_projection(runs.log, StoredRun(run_id, run.last_seq, run.closed))
        texts = [orjson.dumps(c).decode() for c in chunks]
        expected = orjson.loads(messages_json(project_run(run_id, texts, finalize=True)))
        assert got.finalized and orjson.loads(got.messages) == expected, run_id
        cached = await runs.log.cached_projections({run_id: run.last_seq}, False, PROJECTOR_VERSION)
        assert orjson.loads(cached[run_id]) == expected, run_id
