"""Pushed appends redacted across requests: the run's held text kept with the run.

A secret may arrive split over two `POST /v1/runs/{id}/events`, which may reach two
replicas. So what redaction holds back at the end of a request (`Redactor.state`: the
possible start of a match, at most the longest rule's window per open message) is not
released there: it is written with the run, by the append statement that stores the
rest (`Redaction`), and the run's next append, on whichever replica, is redacted from it.

The hold is valid for the run as it was read: the append is stored only if the run's
last seq and hold are still those (the statement checks both under the run row's lock).
An append that lost that race (another got in first) is redacted again from the run as
it is now, a bounded number of times, then refused with `RedactionConflict`.

A producer's retry (the same `expected_seq` and body) must get the first try's answer
and add nothing. The log recognizes one by the chunks stored at its seq, but those were
redacted from the hold as it was before it, so while anything is held before or after
an append with `expected_seq` that stored events, the hold also names that append (its
expected seq, a SHA-256 of its chunks and close, the seq it started after): a retry that
finds the run still where that append left it is answered from that, with nothing
written. An append that stored nothing (all it sent was held) leaves the run's seq where
it was, so the producer's next append, perhaps with the same chunks, comes at the same
expected seq: nothing tells it from a retry, and it is taken as a new append.

A process remembers the hold each of its redacted appends left (`Holds`), so a run's
producer whose appends reach one replica costs no read of it; a hold remembered wrongly
(another replica's append since) fails the statement's check like any race, and is read.

The hold's form is this module's alone (the log stores the text and compares it whole):
JSON with every non-ASCII character escaped, so that text jsonb or PostgreSQL's text
refuse (U+0000, a lone surrogate of a tool call's escapes) is kept as written.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from agent_replay.errors import RedactionConflict, RunClosed, SeqConflict
from agent_replay.ingest.redact import Redactor, Rules
from agent_replay.log import AppendResult, Appends, Held, Redaction, StoredChunk
from agent_replay.log.chunks import loads

# Tries of one append against the run's hold before `RedactionConflict`: each lost try
# means another append to the run committed meanwhile. Between tries a random pause,
# doubling up to a bound, so producers racing on one run take turns instead of
# colliding again at once.
TRIES = 16
_PAUSE_FIRST = 0.002
_PAUSE_MAX = 0.1

_VERSION = 1

# The most characters a run holds back at the end of an append (its streams' held text,
# a tool call's raw text counted too): past it, the longest-open streams are released
# (matched as complete text) by that append. A run's hold is rewritten, and compared, by
# its every append, so this bounds what a producer opening many messages at once can
# make each of them cost; a message holds at most the longest rule's window.
MAX_HELD = 65_536


class Holds:
    """The run positions and holds this process's own redacted appends left, by run: a
    bounded map (the oldest entry goes first), read instead of the log, checked by the
    append statement."""

    __slots__ = ("_known", "_size")

    def __init__(self, size: int = 10_000) -> None:
        self._known: dict[str, Held] = {}
        self._size = size

    def get(self, run_id: str) -> Held | None:
        return self._known.get(run_id)

    def put(self, run_id: str, held: Held) -> None:
        known = self._known
        known.pop(run_id, None)
        if len(known) >= self._size:
            del known[next(iter(known))]
        known[run_id] = held

    def forget(self, run_id: str) -> None:
        self._known.pop(run_id, None)


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=True, separators=(",", ":"))


def _load(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("v") != _VERSION:
        raise ValueError("a redaction hold of another version")
    return document


def _request_key(chunks: Sequence[StoredChunk], close: bool) -> str:
    """What tells a retry of an append from another append at the same seq: its chunks
    as JSON values (as the log compares a retry's), however the body wrote them."""
    digest = hashlib.sha256(b"c" if close else b"o")
    for chunk in chunks:
        value = json.dumps(loads(chunk.text), sort_keys=True, separators=(",", ":"))
        text = value.encode()  # ASCII: every other character escaped
        digest.update(len(text).to_bytes(8, "big"))
        digest.update(text)
    return digest.hexdigest()


def redact_locked(
    rules: Rules, held: Held, chunks: Sequence[StoredChunk], close: bool
) -> tuple[list[StoredChunk], Redaction]:
    """`chunks` redacted from the run's hold as `held` (read under the run row's lock,
    as Durable Streams' guarded append reads it): what to store, and the `Redaction`
    that writes the counts and the new hold in the append's statement. Under the lock
    the run cannot move between the read and the statement, so its guard always holds
    and no try is lost; it still guards, as for any redacted append.

    No retry key (`req`): a Durable Streams producer's retries are recognized by its
    stored producer state, under the same lock, before anything is redacted."""
    document = _load(held.hold)
    redactor = Redactor.restore(rules, None if document is None else document.get("s"))
    out = list(redactor.append(chunks, close))
    out += redactor.shed(MAX_HELD)
    state = None if close else redactor.state()
    hold: dict[str, Any] = {"v": _VERSION, "seq": held.last_seq + len(out)}
    if state is not None:
        hold["s"] = state
    return out, Redaction(redactor.counts, held, _dump(hold) if len(hold) > 2 else None)


async def append_redacted(
    log: Appends,
    rules: Rules,
    run_id: str,
    chunks: Sequence[StoredChunk],
    *,
    expected_seq: int | None = None,
    close: bool = False,
    create: bool = True,
    known: Holds | None = None,
) -> tuple[AppendResult, Counter[str]]:
    """Redact `chunks` from the run's hold and append them with the new hold and the
    counts, in one statement; answers the append's result and the matches it stored
    (for `/metrics`, once committed: nothing else counts them). `known`: this process's
    holds, tried first (and kept up to date)."""
    key: str | None = None  # made when first needed: it parses every chunk
    last = 0
    for tried in range(TRIES):
        if tried:
            pause = min(_PAUSE_MAX, _PAUSE_FIRST * 2**tried)
            await asyncio.sleep(random.uniform(0, pause))
        held = known.get(run_id) if known is not None and not tried else None
        cached = held is not None
        if held is None:
            held = await log.read_hold(run_id) or Held(0, False, None)
        last = held.last_seq
        document = _load(held.hold)
        request = None if document is None else document.get("req")
        if (
            request is not None
            and document is not None
            and request[0] == expected_seq
            and document["seq"] == held.last_seq
        ):
            key = key or _request_key(chunks, close)
            if request[1] == key:
                # A retry of the append that left the run as it is: its first answer.
                before = request[2]
                first = before + 1 if held.last_seq > before else None
                return AppendResult(run_id, first, held.last_seq), Counter()
        previous = None if document is None else document.get("s")
        redactor = Redactor.restore(rules, previous)
        out = list(redactor.append(chunks, close))
        out += redactor.shed(MAX_HELD)
        # A closed run holds nothing: what it held went out before the close.
        state = None if close else redactor.state()
        at = held.last_seq if expected_seq is None else expected_seq - 1
        hold: dict[str, Any] = {"v": _VERSION, "seq": at + len(out)}
        if state is not None:
            hold["s"] = state
        if out and expected_seq is not None and (state is not None or previous is not None):
            # Not for an append that stored nothing (all it sent held): the producer's
            # next append comes at the same expected seq, and one with the same chunks
            # (a digit, a repeated token) must not be taken for its retry.
            key = key or _request_key(chunks, close)
            hold["req"] = [expected_seq, key, at]
        redaction = Redaction(
            redactor.counts,
            Held(at, held.closed, held.hold),
            _dump(hold) if len(hold) > 2 else None,
        )
        try:
            result = await log.append(
                run_id,
                out,
                expected_seq=expected_seq,
                close=close,
                create=create,
                redaction=redaction,
            )
        except RedactionConflict as conflict:
            last = int(conflict.extra.get("last_seq", last))
            continue
        except (RunClosed, SeqConflict):
            if known is not None:
                known.forget(run_id)
            if cached:
                continue  # perhaps only remembered wrongly: answered from the run as it is
            raise
        if known is not None:
            # Its statement checked the run was at `at` and wrote this hold after it.
            known.put(run_id, Held(at + len(out), close, redaction.hold))
        return result, redactor.counts
    raise RedactionConflict(run_id, last)
