"""Reading a version 2 export's body: its event lines, each run's chain, the signature line.

The checks here are the ones `docs/audit/verify_export.py` (the auditor's script, standard
library only) makes, in the same order, so the service and the script name the same line:

- every line after the header is an event line laid out exactly as `format.event_line`
  writes it (`EVENT_LINE`), or the signature line, which can only be the last line;
- the runs' events follow the header's order, each run's from seq 1 to its `last_seq`
  without a gap, repeat or line of another run in between;
- each line's hash is `chain.step` of the line before's (of `chain.GENESIS` for seq 1), its
  seq and its chunk text, the bytes between `"chunk":` and the line's closing brace.

A file altered anywhere the chain covers (a chunk, a seq, a hash; a line removed, added,
moved; the tail cut) fails at the first line where it differs. What the chain does not
cover (the header, `received_at`) only the signature protects.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from agent_replay.chain import GENESIS, step
from agent_replay.errors import ExportChainBroken, InvalidExport, InvalidJson, NestedTooDeep
from agent_replay.log.chunks import dumps, loads

# An event line of version 2, whole: run ids are 1-128 of these characters
# (`agent_replay.log.check_run_id`), so none needs an escape.
EVENT_LINE = re.compile(
    r'\{"run_id":"([A-Za-z0-9._:-]{1,128})","seq":([1-9][0-9]{0,17}),'
    r'"received_at":"([^"\\]*)","hash":"([0-9a-f]{64})","chunk":(.*)\}',
    re.DOTALL,
)
# The same up to the chunk: matched from the start, it leaves the chunk to slicing, which
# finds what EVENT_LINE's last group would at a fraction of the cost.
_EVENT_PREFIX = re.compile(EVENT_LINE.pattern.removesuffix("(.*)\\}"))
SIGNATURE_START = b'{"signature":'
_SIGNATURE_KEYS = frozenset({"algorithm", "sha256", "public_key_sha256", "value"})
_HEX64 = re.compile(r"[0-9a-f]{64}")


class EventLine(NamedTuple):
    # A tuple: one is made per event, and a frozen dataclass's __init__ costs several times more.
    number: int
    run_id: str
    seq: int
    received_at: str
    hash: bytes
    chunk: str  # the text exactly as stored (and hashed)
    value: dict[str, Any]  # the chunk parsed


@dataclass(frozen=True, slots=True)
class RunChain:
    """A run's chain as a file carries it: its events and the hash of its last (its head)."""

    run_id: str
    events: int
    head: bytes


@dataclass(frozen=True, slots=True)
class Signature:
    """The signature line: `value` signs the 32 bytes whose hex is `sha256`, the SHA-256 of
    every byte of the file before the line (`offset` of them)."""

    number: int
    offset: int
    sha256: str
    public_key_sha256: str
    value: str  # base64


def event_line(number: int, text: str) -> EventLine:
    match = _EVENT_PREFIX.match(text)
    if match is None or not text.endswith("}"):
        raise InvalidExport(number, "not an event line as an export writes it")
    run_id, seq, received_at, hash_hex = match.groups()
    chunk = text[match.end() : -1]
    try:
        value = loads(chunk)
    except InvalidJson as exc:
        raise InvalidExport(number, "the chunk is not valid JSON") from exc
    except NestedTooDeep as exc:
        raise InvalidExport(number, f"the chunk is not an AG-UI event ({exc.message})") from exc
    if not isinstance(value, dict):
        raise InvalidExport(number, "the chunk is not a JSON object")
    return EventLine(number, run_id, int(seq), received_at, bytes.fromhex(hash_hex), chunk, value)


def signature_line(number: int, offset: int, text: str) -> Signature:
    try:
        value = loads(text)
    except InvalidJson as exc:
        raise InvalidExport(number, "the signature line is not valid JSON") from exc
    fields = value.get("signature") if isinstance(value, dict) and len(value) == 1 else None
    if not (
        isinstance(fields, dict)
        and fields.keys() == _SIGNATURE_KEYS
        and fields["algorithm"] == "ed25519"
        and all(isinstance(fields[k], str) for k in _SIGNATURE_KEYS)
        and _HEX64.fullmatch(fields["sha256"])
        and _HEX64.fullmatch(fields["public_key_sha256"])
    ):
        raise InvalidExport(number, "not a signature line as an export writes it")
    if dumps(value) != text:
        # Laid out as written, byte for byte: the line is outside what it signs.
        raise InvalidExport(number, "not a signature line as an export writes it")
    return Signature(number, offset, fields["sha256"], fields["public_key_sha256"], fields["value"])


def header_chains(header: dict[str, Any]) -> list[tuple[str, int]]:
    """What checking a file needs of its header, checked no further than that: each run's id
    and `last_seq`, in order (an import checks the rest of each run's fields)."""
    runs = header.get("runs")
    if not isinstance(runs, list) or not runs:
        raise InvalidExport(1, "the header lists no runs")
    order: list[tuple[str, int]] = []
    for run in runs:
        if not isinstance(run, dict):
            raise InvalidExport(1, "each entry of runs must be an object")
        run_id, last_seq = run.get("run_id"), run.get("last_seq")
        if not isinstance(run_id, str) or type(last_seq) is not int or last_seq < 0:
            raise InvalidExport(1, "a run without a run_id or a last_seq")
        if any(run_id == seen for seen, _ in order):
            raise InvalidExport(1, f"run {run_id!r} is listed twice")
        order.append((run_id, last_seq))
    return order


class Chains:
    """Each run's chain, checked as the file's event lines come, in order."""

    def __init__(self, runs: Sequence[tuple[str, int]]) -> None:
        self._runs = list(runs)  # (run_id, last_seq), in the header's order
        self._known = {run_id for run_id, _ in self._runs}
        self._index = 0
        self._count = 0
        self._head = GENESIS
        self._done: list[RunChain] = []

    def _next_run(self) -> None:
        run_id, _ = self._runs[self._index]
        self._done.append(RunChain(run_id, self._count, self._head))
        self._index += 1
        self._count = 0
        self._head = GENESIS

    def feed(self, event: EventLine) -> None:
        number = event.number
        if event.run_id not in self._known:
            raise InvalidExport(number, f"run {event.run_id!r} is not listed in the header")
        while True:
            if self._index == len(self._runs):
                raise ExportChainBroken(
                    number,
                    f"chain broken at run {event.run_id!r} seq {event.seq}: a line after every "
                    "run's last event (a line added or moved?)",
                )
            run_id, last_seq = self._runs[self._index]
            if event.run_id == run_id:
                break
            if self._count < last_seq:
                raise ExportChainBroken(
                    number,
                    f"chain broken at run {run_id!r} seq {self._count + 1}: a line of run "
                    f"{event.run_id!r} comes instead (a line removed or moved?)",
                )
            self._next_run()
        expected = self._count + 1
        if expected > last_seq:
            raise ExportChainBroken(
                number,
                f"chain broken at run {run_id!r} seq {event.seq}: past the header's last_seq "
                f"{last_seq} (a line added?)",
            )
        if event.seq != expected:
            raise ExportChainBroken(
                number,
                f"chain broken at run {run_id!r} seq {expected}: the line has seq {event.seq} "
                "(a line removed, added or moved?)",
            )
        head = step(self._head, event.seq, event.chunk)
        if head != event.hash:
            raise ExportChainBroken(
                number,
                f"chain broken at run {run_id!r} seq {expected}: its hash does not follow from "
                "its chunk and the line before (a chunk or a hash changed?)",
            )
        self._count = expected
        self._head = head

    def finish(self, number: int) -> list[RunChain]:
        """Every run's chain, once the file ended before line `number`."""
        while self._index < len(self._runs):
            run_id, last_seq = self._runs[self._index]
            if self._count < last_seq:
                raise ExportChainBroken(
                    number,
                    f"chain broken at run {run_id!r} seq {self._count + 1}: the file ends at seq "
                    f"{self._count}, the header says last_seq {last_seq} (truncated?)",
                )
            self._next_run()
        return self._done


def physical_lines(data: bytes, start: int) -> Iterator[tuple[int, bytes, bool]]:
    """(offset, bytes, ends_with_newline) of each line from byte `start`, blank ones too."""
    offset = start
    size = len(data)
    while offset < size:
        end = data.find(b"\n", offset)
        complete = end >= 0
        if not complete:
            end = size
        yield offset, data[offset:end], complete
        offset = end + 1


@dataclass(frozen=True, slots=True)
class Body:
    """A version 2 file after its header, its chains checked."""

    events: list[EventLine]
    signature: Signature | None
    chains: list[RunChain]  # in the header's order


def read_body(data: bytes, runs: Sequence[tuple[str, int]], start: int, first_number: int) -> Body:
    """The lines after the header (`start`: the offset of the line numbered `first_number`);
    raises at the first line that breaks the format or the chain."""
    chains = Chains(runs)
    events: list[EventLine] = []
    number = first_number
    signature: Signature | None = None
    for offset, raw, complete in physical_lines(data, start):
        if signature is not None:
            raise InvalidExport(number, "a line after the signature line")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidExport(number, f"not UTF-8 text ({exc.reason})") from exc
        if not text:
            raise InvalidExport(number, "a blank line (an export has none)")
        if not complete and not text.endswith("}"):
            raise InvalidExport(number, "the file ends in the middle of this line")
        if raw.startswith(SIGNATURE_START):
            signature = signature_line(number, offset, text)
        else:
            event = event_line(number, text)
            chains.feed(event)
            events.append(event)
        number += 1
    done = chains.finish(signature.number if signature is not None else number)
    return Body(events, signature, done)
