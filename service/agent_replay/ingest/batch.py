"""Parse an append request body (JSON envelope or NDJSON) into a `Batch`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agent_replay.errors import InvalidEvent, InvalidJson, InvalidRequest, PayloadTooLarge
from agent_replay.ingest.verbatim import split_events, split_lines
from agent_replay.log.chunks import dumps, loads, stored, stored_values, texts_of
from agent_replay.log.rows import BATCH_MIN
from agent_replay.log.store import MAX_SEQ
from agent_replay.log.values import StoredChunk


@dataclass(frozen=True, slots=True)
class Limits:
    max_chunk_bytes: int = 1 << 20
    max_batch_bytes: int = 8 << 20
    max_batch_events: int = 10_000

    def check_body(self, size: int) -> None:
        if size > self.max_batch_bytes:
            raise PayloadTooLarge(
                f"the batch is over {self.max_batch_bytes} bytes; split it",
                limit=self.max_batch_bytes,
            )

    def check_count(self, count: int) -> None:
        if count > self.max_batch_events:
            raise PayloadTooLarge(
                f"the batch has {count} events, over the limit of {self.max_batch_events}",
                limit=self.max_batch_events,
            )

    def check_chunk(self, chunk: StoredChunk, index: int) -> None:
        # A character is at most 4 UTF-8 bytes: only long texts pay for an encode.
        size = len(chunk.text)
        if size * 4 > self.max_chunk_bytes and (
            size > self.max_chunk_bytes or len(chunk.text.encode()) > self.max_chunk_bytes
        ):
            raise PayloadTooLarge(
                f"event {index} is over {self.max_chunk_bytes} bytes",
                index=index,
                limit=self.max_chunk_bytes,
            )


@dataclass(frozen=True, slots=True)
class Batch:
    chunks: Sequence[StoredChunk]
    expected_seq: int | None = None
    close: bool = False


def whole_number(text: str) -> int | None:
    """`text` as a whole number of at most 19 digits (bigint-sized), else None.

    ASCII only: "²".isdigit() holds, and int() refuses it.
    """
    return int(text) if text.isascii() and text.isdigit() and len(text) < 20 else None


def expected_from_query(text: str | None) -> int | None:
    """`?expected_seq=` (NDJSON bodies), checked as the body's field is."""
    if text is None:
        return None
    number = whole_number(text)
    return _expected(text if number is None else number)


def _expected(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_SEQ:
        raise InvalidRequest(f"expected_seq must be a whole number from 1 to {MAX_SEQ}")
    return value


def _close(value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidRequest("close must be true or false")
    return value


def _check_chunks(chunks: Sequence[StoredChunk], limits: Limits) -> None:
    cap = limits.max_chunk_bytes // 4
    texts = texts_of(chunks)
    if texts and max(map(len, texts)) > cap:
        for index, text in enumerate(texts):
            if len(text) > cap:
                limits.check_chunk(chunks[index], index)


def _check_slices(chunks: Sequence[StoredChunk], body: bytes, limits: Limits) -> None:
    """The limits of chunks whose texts are slices of `body`."""
    limits.check_count(len(chunks))
    if len(body) > limits.max_chunk_bytes:  # else no slice of it can be
        _check_chunks(chunks, limits)


def parse_json_batch(body: bytes, limits: Limits, columns_from: int | None = BATCH_MIN) -> Batch:
    """`{"events": [chunk, ...], "expected_seq": N?, "close": bool?}`; from `columns_from`
    events (the log's `batch_min`), the chunks may be `Chunks` (see `split_events`)."""
    limits.check_body(len(body))
    verbatim = split_events(body, columns_from)
    if verbatim is not None:
        chunks, expected_seq, close = verbatim
        _check_slices(chunks, body, limits)
        return Batch(chunks, _expected(expected_seq), _close(close))
    envelope = loads(body)
    if not isinstance(envelope, dict):
        raise InvalidRequest('the body must be a JSON object {"events": [...]}')
    events = envelope.get("events")
    if not isinstance(events, list):
        raise InvalidRequest('the body needs "events": a list of chunks')
    unknown = set(envelope) - {"events", "expected_seq", "close"}
    if unknown:
        raise InvalidRequest(f"unknown fields in the body: {sorted(unknown)}")
    limits.check_count(len(events))
    chunks = stored_values(events)
    _check_chunks(chunks, limits)
    return Batch(
        chunks, _expected(envelope.get("expected_seq")), _close(envelope.get("close", False))
    )


def parse_ndjson_batch(
    body: bytes,
    limits: Limits,
    *,
    expected_seq: int | None = None,
    close: bool = False,
    columns_from: int | None = BATCH_MIN,
) -> Batch:
    """One chunk per line; blank lines are ignored. Each line is kept as sent (without the
    spaces around it). From `columns_from` events the chunks may be `Chunks`, read by the
    C scan (`split_lines`); any body it does not take is read line by line."""
    limits.check_body(len(body))
    columns = split_lines(body, columns_from)
    if columns is not None:
        _check_slices(columns, body, limits)
        return Batch(columns, expected_seq, close)
    chunks: list[StoredChunk] = []
    for number, raw in enumerate(body.split(b"\n"), start=1):
        line = raw.strip()
        if not line:
            continue
        index = len(chunks)
        limits.check_count(index + 1)
        try:
            value = loads(line)
        except InvalidJson as exc:
            raise InvalidJson(
                f"line {number} is not valid JSON: {exc.message}", line=number
            ) from exc
        # The line is the chunk's own text: keep it verbatim (it is exact even
        # where a parsed value would not be), unless a raw CR between tokens
        # would break SSE framing.
        text = dumps(value) if b"\r" in line else line.decode()
        try:
            chunk = stored(value, index, text)
        except InvalidEvent as exc:
            raise InvalidEvent(f"{exc.message} (line {number})", index=index, line=number) from exc
        limits.check_chunk(chunk, index)
        chunks.append(chunk)
    return Batch(chunks, expected_seq, close)
