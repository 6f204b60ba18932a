"""A run's hash chain checked against what the log stores (agent_replay.chain).

Fed a run's events in seq order as the log's one reader gives them (its
inherited prefix first, for a fork), `ChainCheck` recomputes the chain from the
genesis hash and compares every stored hash, then the run row's `last_seq` and
head. It stops at the first thing wrong: everything after an altered event is
suspect, and the first altered seq is what an auditor needs. Pure: no I/O.
"""

from __future__ import annotations

from agent_replay.chain import GENESIS, HASH_BYTES, step
from agent_replay.log.values import Verdict

# Why a run fails its check: short fixed strings (docs/concepts/integrity.md).
HASH_MISMATCH = "hash_mismatch"  # the stored hash is not the chain's: chunk, seq or order changed
MISSING_EVENT = "missing_event"  # a seq below the last stored one is absent: a row deleted
DUPLICATE_EVENT = "duplicate_event"  # a seq stored twice (rows overlapping)
UNCHAINED = "unchained"  # an event without a hash: stored behind the service's back
PAST_LAST_SEQ = "past_last_seq"  # events stored past the run's last_seq
TRUNCATED = "truncated"  # fewer events than the run's last_seq: its tail is gone
HEAD_MISMATCH = "head_mismatch"  # the run's head is no event's hash: the tail went with last_seq
PAST_HEAD = "past_head"  # events after the one whose hash is the run's head
REASONS = (
    HASH_MISMATCH, MISSING_EVENT, DUPLICATE_EVENT, UNCHAINED, PAST_LAST_SEQ, TRUNCATED,
    HEAD_MISMATCH, PAST_HEAD,
)  # fmt: skip


class ChainCheck:
    """One run's check: `feed` its events in seq order (until it answers False, the
    first fault found), then `verdict`."""

    def __init__(self, run_id: str, last_seq: int, head: bytes | None) -> None:
        self.run_id = run_id
        self.last_seq = last_seq
        self.stored_head = head
        self.head = GENESIS
        self.events = 0
        self.expected = 1
        # The seq whose hash is the stored head, if any (tells "rows added past the
        # head" from "the head changed").
        self.at_head = 0 if head == GENESIS else None
        self.fault: tuple[int, str] | None = None

    @property
    def done(self) -> bool:
        return self.fault is not None

    def feed(self, seq: int, chunk: str, stored: bytes | None) -> bool:
        """Check the next event; False once a fault is found (feed no more)."""
        if self.fault is not None:
            return False
        if seq > self.expected:
            self.fault = (self.expected, MISSING_EVENT)
        elif seq < self.expected:
            self.fault = (seq, DUPLICATE_EVENT)
        elif seq > self.last_seq:
            self.fault = (seq, PAST_LAST_SEQ)
        elif stored is None:
            self.fault = (seq, UNCHAINED)
        else:
            head = step(self.head, seq, chunk)
            if len(stored) != HASH_BYTES or head != stored:
                self.fault = (seq, HASH_MISMATCH)
            else:
                self.head = head
                self.events += 1
                self.expected += 1
                if head == self.stored_head:
                    self.at_head = seq
        return self.fault is None

    def verdict(self) -> Verdict:
        """The answer once every event was fed (or the first fault found)."""
        fault = self.fault
        if fault is None:
            if self.events < self.last_seq:
                fault = (self.events + 1, TRUNCATED)
            elif self.stored_head is None and self.events == 0:
                # An empty run the backfill has not reached yet: nothing to name.
                return self._answer(None, UNCHAINED)
            elif self.head != self.stored_head:
                if self.at_head is not None and self.at_head < self.events:
                    fault = (self.at_head + 1, PAST_HEAD)
                else:
                    fault = (self.events + 1, HEAD_MISMATCH)
        if fault is None:
            return self._answer(None, None)
        return self._answer(*fault)

    def _answer(self, seq: int | None, reason: str | None) -> Verdict:
        head = None if self.stored_head is None else self.stored_head.hex()
        return Verdict(self.run_id, reason is None, self.events, head, seq, reason)
