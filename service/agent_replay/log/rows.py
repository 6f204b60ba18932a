"""How events sit in `events` rows: one event a row, or a batch of them in one.

An append that brings a run at least `BATCH_MIN` chunks at once stores them
`BATCH_MAX` to a row (revision 0007_event_batches): one index entry, one heap
tuple and one TOASTed value for the lot, where a row per event would pay each of
those per event. That is what lets a large POST be stored faster than the
same events COPYed as rows (the bound the row-per-event layout sets).

A row's `seq` is the seq of its **last** event and `n` its count, so a row
holds seqs `seq - n + 1 .. seq`, and every read keeps its index range: the rows
holding any event after `after` are exactly those with `seq > after`. A read
whose upper bound may fall inside a row (a fork point) adds `seq < hi +
BATCH_MAX` to keep its range bounded and `seq - n < hi` to keep only rows
starting at or before `hi`; the events outside the asked range are cut here.

A batch row's `chunk` is its chunks' texts joined with a newline and its
`type` their types joined the same way. A stored chunk's text never holds a
raw newline (it is compact JSON or a single NDJSON line; JSON escapes control
characters in strings); a type could, so a batch with one is stored a row per
event. Its `received_at` is the append's, as for every event of one append.
`message_id` and `tool_call_id` are kept on single-event rows only (nothing
queries them; the chunk holds both).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

from agent_replay.log.chunks import Chunks, texts_of, types_of
from agent_replay.log.values import StoredChunk

# An append bringing a run fewer chunks is stored a row per event: for two or
# three a shared row saves next to nothing, while from a handful on it spares
# both sides per-event work (the rows' ids, the index entries and, for a JSON
# body, each event's parse to a tuple), which small POSTs pay on every request.
BATCH_MIN = 4
# Events per batch row: bounds what a read starting inside a row discards, and
# the extra index range of a read whose upper bound falls inside one.
BATCH_MAX = 256

SEP = "\n"


def packed(
    chunks: Sequence[StoredChunk], least: int = BATCH_MIN
) -> list[tuple[int, int, str, str]] | None:
    """`(last, n, type, chunk)` per row for one run's chunks (`last` counting from 1), or
    None when they are to be stored a row per event: fewer than `least`, or a newline
    in a type or a text (found by counting the joined separators: one C pass each)."""
    total = len(chunks)
    if total < least:
        return None
    types = types_of(chunks)
    # `Chunks` joins its texts straight from the body's bytes, and they hold no
    # newline (its body had none): only the types are counted.
    columns = chunks if type(chunks) is Chunks else None
    texts = [] if columns is not None else texts_of(chunks)
    out: list[tuple[int, int, str, str]] = []
    for start in range(0, total, BATCH_MAX):
        end = min(start + BATCH_MAX, total)
        kind = SEP.join(types[start:end])
        if kind.count(SEP) != end - start - 1:
            return None
        if columns is not None:
            chunk = columns.joined(start, end, SEP)
        else:
            chunk = SEP.join(texts[start:end])
            if chunk.count(SEP) != end - start - 1:
                return None
        out.append((end, end - start, kind, chunk))
    return out


_N = itemgetter(1)
_EVENT = itemgetter(0, 2, 3, 4)
_CHUNK = itemgetter(0, 2)


def _whole(rows: list[Any], width: int, after: int, upto: int | None, limit: int | None) -> bool:
    """Whether every row is one event inside the bounds (the common case, checked in C
    and at the ends only: rows come in seq order), so each is taken as it is."""
    return (
        bool(rows)
        and len(rows[0]) == width
        and (limit is None or len(rows) <= limit)
        and rows[0][0] > after
        and (upto is None or rows[-1][0] <= upto)
        and sum(map(_N, rows)) == len(rows)
    )


def _span(seq: int, n: int, after: int, upto: int | None) -> range:
    """The positions (0-based) within a row of its events with `after < seq <= upto`."""
    first = seq - n + 1
    return range(max(after + 1 - first, 0), n if upto is None else min(upto - first + 1, n))


def events_of(
    rows: Iterable[Any],
    after: int,
    upto: int | None = None,
    limit: int | None = None,
) -> list[tuple[int, str, str, Any]]:
    """`(seq, type, chunk, received_at)` per event with `after < seq <= upto`, at most
    `limit`, from `(seq, n, type, chunk, received_at[, lo, hi])` rows in seq order.

    A row carrying `lo` and `hi` (a fork chain's segment) is cut by those instead.
    """
    rows = rows if type(rows) is list else list(rows)
    if _whole(rows, 5, after, upto, limit):
        return list(map(_EVENT, rows))
    out: list[tuple[int, str, str, Any]] = []
    for row in rows:
        seq, n, kind, chunk, received_at = row[:5]
        lo, hi = (row[5], row[6]) if len(row) > 5 else (after, upto)
        if n == 1:
            if seq > lo and (hi is None or seq <= hi):
                out.append((seq, kind, chunk, received_at))
        else:
            kinds = kind.split(SEP)
            chunks = chunk.split(SEP)
            first = seq - n + 1
            out.extend((first + i, kinds[i], chunks[i], received_at) for i in _span(seq, n, lo, hi))
        if limit is not None and len(out) >= limit:
            del out[limit:]
            break
    return out


def chunks_of(
    rows: Iterable[Any],
    after: int,
    upto: int | None = None,
    limit: int | None = None,
) -> list[tuple[int, str]]:
    """`(seq, chunk)` per event, as `events_of`, from `(seq, n, chunk[, lo, hi])` rows."""
    rows = rows if type(rows) is list else list(rows)
    if _whole(rows, 3, after, upto, limit):
        return list(map(_CHUNK, rows))
    out: list[tuple[int, str]] = []
    for row in rows:
        seq, n, chunk = row[:3]
        lo, hi = (row[3], row[4]) if len(row) > 3 else (after, upto)
        if n == 1:
            if seq > lo and (hi is None or seq <= hi):
                out.append((seq, chunk))
        else:
            chunks = chunk.split(SEP)
            first = seq - n + 1
            out.extend((first + i, chunks[i]) for i in _span(seq, n, lo, hi))
        if limit is not None and len(out) >= limit:
            del out[limit:]
            break
    return out


def hashed_of(rows: Iterable[Any], after: int) -> list[tuple[int, str, bytes | None]]:
    """`(seq, chunk, stored hash)` per event with seq > `after`, from `(seq, n, chunk,
    hashes[, lo, hi])` rows in seq order (the chain's read, agent_replay.log.integrity).

    Unlike the other readers this one trusts nothing of a row's shape: a batch row
    whose chunk splits into fewer events than `n`, or whose hashes are short, yields
    an empty chunk or a short hash for the missing ones, which then fail the chain.
    """
    out: list[tuple[int, str, bytes | None]] = []
    for row in rows:
        seq, n, chunk, hashes = row[:4]
        lo, hi = (row[4], row[5]) if len(row) > 4 else (after, None)
        stored = None if hashes is None else bytes(hashes)
        if n == 1:
            if seq > lo and (hi is None or seq <= hi):
                out.append((seq, chunk, stored))
            continue
        chunks = chunk.split(SEP)
        first = seq - n + 1
        for i in _span(seq, n, lo, hi):
            text = chunks[i] if i < len(chunks) else ""
            at = None if stored is None else stored[32 * i : 32 * i + 32]
            out.append((first + i, text, at))
    return out
