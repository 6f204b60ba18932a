"""Reading an export file back, validated completely before anything is stored.

Every problem is reported with its 1-based line number (`InvalidExport`):
a first line that is not an export header, an unsupported format version,
a line that is not JSON (or is cut short at the end of the file), an event
for a run the header does not list, a seq that skips or repeats, a run with
fewer events than the header's `last_seq`. A file either reads whole or not
at all, which is what lets an import be all-or-nothing.

A version 2 file's body is read by `agent_replay.archive.chained`, which checks each run's
hash chain (`ExportChainBroken` names the first line it fails at) and, when the file is
signed, that the bytes before the signature line are those it covers; a version 1 file has
no chain, and `Archive.chained` says so.

Lines are split on "\\n" only: JSON text may hold raw U+2028 or U+0085,
which `str.splitlines` would also split on.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from agent_replay.archive.chained import EventLine, RunChain, Signature, read_body
from agent_replay.archive.format import FORMAT, UNCHAINED, VERSION, VERSIONS, unchained_prefix
from agent_replay.errors import InvalidExport, InvalidJson, InvalidRunId, ReplayError
from agent_replay.log import check_run_id
from agent_replay.log.chunks import check_nesting, dumps, loads, stored
from agent_replay.log.filters import STATUSES
from agent_replay.log.summary import summarize
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord

_EVENT_KEYS = frozenset({"run_id", "seq", "received_at", "chunk"})
_JSON_SPACE = " \t\r\n"


@dataclass(frozen=True, slots=True)
class Archive:
    runs: list[LoadedRun]  # in header order
    version: int = VERSION
    # Each run's chain as the file carries it (checked); none in a version 1 file.
    chains: list[RunChain] = field(default_factory=list)
    signature: Signature | None = None  # its digest checked; its key and value are not

    @property
    def records(self) -> list[RunRecord]:
        return [run.record for run in self.runs]

    @property
    def chained(self) -> bool:
        return self.version != UNCHAINED


def _lines(data: bytes) -> Iterator[tuple[int, str, bool]]:
    """(number, text, ends_with_newline) for each non-blank line."""
    pieces = data.split(b"\n")
    last = len(pieces) - 1
    for index, raw in enumerate(pieces):
        number = index + 1
        if index == last and not raw:
            break  # the final newline
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidExport(number, f"not UTF-8 text ({exc.reason})") from exc
        if text.strip(_JSON_SPACE):
            yield number, text, index < last


def _object(number: int, text: str, complete: bool) -> dict[str, Any]:
    try:
        value = loads(text)
    except InvalidJson as exc:
        if not complete:
            raise InvalidExport(number, "the file ends in the middle of this line") from exc
        raise InvalidExport(number, "not valid JSON") from exc
    if not isinstance(value, dict):
        raise InvalidExport(number, "expected a JSON object")
    return value


def _time(number: int, value: Any, name: str, *, optional: bool = False) -> datetime | None:
    if value is None and optional:
        return None
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        moment = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidExport(number, f"{name} must be an ISO-8601 time, not {value!r}") from exc
    if moment.tzinfo is None:
        raise InvalidExport(number, f"{name} {value!r} has no UTC offset")
    return moment


def _optional_text(number: int, run: dict[str, Any], name: str) -> str | None:
    value = run.get(name)
    if value is not None and not isinstance(value, str):
        raise InvalidExport(number, f"run {run.get('run_id')!r}: {name} must be a string or null")
    return value


def _record(run: Any) -> RunRecord:
    if not isinstance(run, dict):
        raise InvalidExport(1, "each entry of runs must be an object")
    run_id = run.get("run_id")
    try:
        run_id = check_run_id(run_id if isinstance(run_id, str) else "")
    except InvalidRunId as exc:
        raise InvalidExport(1, exc.message) from exc
    status = run.get("status")
    if status not in STATUSES:
        raise InvalidExport(1, f"run {run_id!r}: unknown status {status!r}")
    last_seq = run.get("last_seq")
    if type(last_seq) is not int or last_seq < 0:
        raise InvalidExport(1, f"run {run_id!r}: last_seq must be an integer >= 0")
    metadata = run.get("metadata", {})
    if not isinstance(metadata, dict):
        raise InvalidExport(1, f"run {run_id!r}: metadata must be an object")
    created = _time(1, run.get("created_at"), "created_at")
    updated = _time(1, run.get("updated_at", run.get("created_at")), "updated_at")
    assert created is not None and updated is not None
    value = run.get("input")
    return RunRecord(
        run_id=run_id,
        thread_id=_optional_text(1, run, "thread_id"),
        agent=_optional_text(1, run, "agent"),
        status=status,
        created_at=created,
        updated_at=updated,
        closed_at=_time(1, run.get("closed_at"), "closed_at", optional=True),
        last_seq=last_seq,
        error_message=_optional_text(1, run, "error_message"),
        metadata=metadata,
        input=None if value is None else dumps(value),
        error_code=_optional_text(1, run, "error_code"),
    )


def header_object(number: int, text: str, complete: bool) -> dict[str, Any]:
    """The first line, when it is the header of an export of a version this build reads."""
    header = _object(number, text, complete)
    if header.get("format") != FORMAT or number != 1:
        raise InvalidExport(number, f"not an export file: the first line must be a {FORMAT} header")
    if header.get("version") not in VERSIONS:
        raise InvalidExport(
            1,
            f"export format version {header.get('version')!r} is not supported "
            f"(this build reads versions {', '.join(map(str, VERSIONS))})",
        )
    return header


def header_runs(header: dict[str, Any]) -> tuple[list[RunRecord], set[str]]:
    """The header's runs, and those it gives no `error_code` (a file written before
    runs kept one: their events say it)."""
    runs = header.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InvalidExport(1, "the header lists no runs")
    records = [_record(run) for run in runs]
    seen: set[str] = set()
    for record in records:
        if record.run_id in seen:
            raise InvalidExport(1, f"run {record.run_id!r} is listed twice")
        seen.add(record.run_id)
    return records, {
        r.run_id for r, run in zip(records, runs, strict=True) if "error_code" not in run
    }


def _chunk_text(line: str, value: dict[str, Any]) -> str:
    """The chunk's own text in the line, when the line is laid out as we write it.

    A file reformatted by another tool falls back to re-encoding the parsed
    chunk: equal as JSON, though not byte for byte what was exported.
    """
    prefix = unchained_prefix(value["run_id"], value["seq"], value["received_at"])
    body = line.rstrip(_JSON_SPACE)
    if body.startswith(prefix) and body.endswith("}"):
        return body[len(prefix) : -1].strip(_JSON_SPACE)
    return dumps(value["chunk"])


def _event(number: int, line: str, value: dict[str, Any]) -> LoggedEvent:
    if value.keys() != _EVENT_KEYS:
        raise InvalidExport(number, "an event line has exactly run_id, seq, received_at, chunk")
    received = _time(number, value["received_at"], "received_at")
    assert received is not None
    try:
        chunk = stored(value["chunk"], number, _chunk_text(line, value))
        check_nesting([chunk])
    except ReplayError as exc:
        raise InvalidExport(number, f"the chunk is not an AG-UI event ({exc.message})") from exc
    return LoggedEvent(chunk, received)


def check_digest(data: bytes, signature: Signature) -> None:
    """The bytes before the signature line are those it signed (without the key this shows
    only that nothing changed by accident: whoever changes the file can write a new digest)."""
    if hashlib.sha256(data[: signature.offset]).hexdigest() != signature.sha256:
        raise InvalidExport(
            signature.number,
            "the file's content before its signature line is not what was signed "
            "(altered after signing)",
        )


def first_line(data: bytes) -> tuple[int, str, bool]:
    first = next(_lines(data), None)
    if first is None:
        raise InvalidExport(1, "the file is empty")
    return first


def body_start(data: bytes) -> int:
    """The offset of line 2."""
    newline = data.find(b"\n")
    return len(data) if newline < 0 else newline + 1


def read_archive(data: bytes) -> Archive:
    number, text, complete = first_line(data)
    header = header_object(number, text, complete)
    records, derive = header_runs(header)
    if header["version"] == UNCHAINED:
        runs = _unchained_events(data, records)
        return Archive(_derived(records, derive, runs), UNCHAINED)
    body = read_body(data, [(r.run_id, r.last_seq) for r in records], body_start(data), 2)
    if body.signature is not None:
        check_digest(data, body.signature)
    runs = {r.run_id: [] for r in records}
    for event in body.events:
        runs[event.run_id].append(_chained_event(event))
    return Archive(_derived(records, derive, runs), VERSION, body.chains, body.signature)


def _chained_event(event: EventLine) -> LoggedEvent:
    received = _time(event.number, event.received_at, "received_at")
    assert received is not None
    try:
        chunk = stored(event.value, event.number, event.chunk)
        check_nesting([chunk])
    except ReplayError as exc:
        problem = f"the chunk is not an AG-UI event ({exc.message})"
        raise InvalidExport(event.number, problem) from exc
    return LoggedEvent(chunk, received)


def _derived(
    records: list[RunRecord], derive: set[str], events: dict[str, list[LoggedEvent]]
) -> list[LoadedRun]:
    records = [
        replace(r, error_code=summarize(e.chunk for e in events[r.run_id]).error_code)
        if r.run_id in derive
        else r
        for r in records
    ]
    return [LoadedRun(r, events[r.run_id]) for r in records]


def _unchained_events(data: bytes, records: list[RunRecord]) -> dict[str, list[LoggedEvent]]:
    """A version 1 file's events, by run (blank lines allowed, runs interleaved)."""
    lines = _lines(data)
    last_number = next(lines)[0]
    events: dict[str, list[LoggedEvent]] = {r.run_id: [] for r in records}
    last_seqs = {r.run_id: r.last_seq for r in records}
    for number, text, complete in lines:
        last_number = number
        value = _object(number, text, complete)
        run_id, seq = value.get("run_id"), value.get("seq")
        if not isinstance(run_id, str) or run_id not in events:
            raise InvalidExport(number, f"run {run_id!r} is not listed in the header")
        logged = events[run_id]
        expected = len(logged) + 1
        if type(seq) is not int or seq != expected:
            problem = (
                f"seq {expected} is missing"
                if type(seq) is int and seq > expected
                else "out of order"
            )
            raise InvalidExport(
                number, f"run {run_id!r}: seq {seq!r} after {expected - 1} ({problem})"
            )
        if seq > last_seqs[run_id]:
            raise InvalidExport(
                number,
                f"run {run_id!r}: seq {seq} is past the header's last_seq {last_seqs[run_id]}",
            )
        logged.append(_event(number, text, value))
    for record in records:
        if len(events[record.run_id]) != record.last_seq:
            raise InvalidExport(
                last_number + 1,
                f"the file ends at seq {len(events[record.run_id])} of run {record.run_id!r}, "
                f"whose header says last_seq {record.last_seq} (truncated?)",
            )
    return events
