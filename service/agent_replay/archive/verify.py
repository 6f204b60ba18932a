"""`agent-replay verify FILE`: is an export file what was exported?

A file is *intact* when every run's chain holds (`agent_replay.archive.chained`), its
signature line, if any, covers the bytes before it, and, given a public key, that line is
a valid signature by that key. It is *altered* at the first line where any of that fails,
and *unreadable* when it is not an export this build reads (not one at all, or version 1,
which carries no chain to check). Of the header it checks what the chains need (each run's id
and `last_seq`), as the auditor's script does: whether the rest would import is `import`'s
question. The answer is a value; the command prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from agent_replay.archive.chained import RunChain, header_chains, read_body
from agent_replay.archive.format import UNCHAINED
from agent_replay.archive.reader import (
    body_start,
    check_digest,
    first_line,
    header_object,
)
from agent_replay.archive.signing import fingerprint, signature_problem
from agent_replay.errors import InvalidExport

Status = Literal["intact", "altered", "unreadable"]
EXIT_CODES: dict[Status, int] = {"intact": 0, "altered": 1, "unreadable": 3}


@dataclass(frozen=True, slots=True)
class FileVerdict:
    status: Status
    line: int | None = None  # the first line found altered
    reason: str | None = None
    runs: tuple[RunChain, ...] = ()
    signed_by: str | None = None  # the signing key's public key SHA-256, when signed
    signature_checked: bool = False  # against a key given

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


def verify_file(data: bytes, key: Ed25519PublicKey | None = None) -> FileVerdict:
    try:
        header = header_object(*first_line(data))
    except InvalidExport as exc:
        return FileVerdict("unreadable", exc.line, exc.message)
    if header["version"] == UNCHAINED:
        return FileVerdict(
            "unreadable", 1, "a version 1 export: it carries no hash chain, so nothing to verify"
        )
    try:
        body = read_body(data, header_chains(header), body_start(data), 2)
        if body.signature is not None:
            check_digest(data, body.signature)
    except InvalidExport as exc:
        return FileVerdict("altered", exc.line, exc.message)
    runs = tuple(body.chains)
    signature = body.signature
    if key is None:
        signed_by = None if signature is None else signature.public_key_sha256
        return FileVerdict("intact", runs=runs, signed_by=signed_by)
    if signature is None:
        end = data.count(b"\n") + (not data.endswith(b"\n")) + 1
        return FileVerdict(
            "altered",
            end,
            "the file is unsigned but a key was given "
            f"(expected a signature by public key sha256 {fingerprint(key)})",
            runs,
        )
    problem = signature_problem(signature, key)
    if problem is not None:
        return FileVerdict("altered", signature.number, problem, runs, signature.public_key_sha256)
    return FileVerdict(
        "intact", runs=runs, signed_by=signature.public_key_sha256, signature_checked=True
    )
