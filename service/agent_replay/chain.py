"""A run's hash chain: the one definition every part of the service and an auditor share.

Each event of a run is chained to the one before it, so changing, removing, reordering or
adding an event anywhere changes every hash after it:

    h_0 = 32 zero bytes
    h_n = SHA-256(h_{n-1} || seq_n as 8 bytes, big-endian || chunk_n as UTF-8)

`chunk_n` is the event's chunk text exactly as the log stores it (and as an export writes
it), whatever row layout holds it. SHA-256 because PostgreSQL has it built in (`sha256`,
with `int8send` giving the same 8 bytes), so the log can chain events inside the statement
that numbers them, and any auditor's toolbox has it. Standard library only: the archive, the
log and the verification script in the manual all follow this module.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

# The hash before a run's first event.
GENESIS = bytes(32)
HASH_BYTES = 32


def step(previous: bytes, seq: int, chunk: str) -> bytes:
    """The hash of event `seq` whose chunk is `chunk`, following `previous`."""
    return hashlib.sha256(previous + seq.to_bytes(8, "big") + chunk.encode()).digest()


def fold(events: Iterable[tuple[int, str]], previous: bytes = GENESIS) -> bytes:
    """The head after `events` (seq, chunk) in order, starting from `previous`."""
    head = previous
    for seq, chunk in events:
        head = step(head, seq, chunk)
    return head
