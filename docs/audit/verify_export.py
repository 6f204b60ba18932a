#!/usr/bin/env python3
"""Check an agent-replay export file (format version 2) with the Python standard library alone.

    python3 verify_export.py FILE [--public-key PUBLIC.pem]

Exit status: 0 intact, 1 altered (the first altered line and why on stderr), 3 unreadable or
not a version 2 export (or, with --public-key, no `openssl` to check the signature with).
Without --public-key it checks every run's hash chain and that the file's content is what
its signature line, if any, says was signed. With it, also that the file is signed by that
key: the key's fingerprint here, the Ed25519 signature itself by
`openssl pkeyutl -verify -rawin` (the standard library has no Ed25519).

The format, from the manual (docs/guides/signed-exports.md):
- line 1 is the header: {"format":"agent-replay.export","version":2,"runs":[...]}, each run
  with its "run_id" and "last_seq";
- then each run's events in the header's order, seq 1 to last_seq, one line each:
  {"run_id":"ID","seq":N,"received_at":"TIME","hash":"HEX","chunk":CHUNK}
  where CHUNK is the event's JSON text exactly as the service stored it, and
  hash_N = SHA-256(hash_{N-1} || N as 8 bytes big-endian || CHUNK as UTF-8), hash_0 = 32 zero bytes;
- optionally a last line {"signature":{"algorithm":"ed25519","sha256":"HEX",
  "public_key_sha256":"HEX","value":"BASE64"}}: "sha256" is the SHA-256 of every byte before
  that line, "value" the Ed25519 signature of those 32 bytes, "public_key_sha256" the SHA-256
  of the signer's public key as DER SubjectPublicKeyInfo.
The last line's hash of each run is the run's chain head: compare it with the head the service
reports for the run (`GET /v1/runs/{id}/verify`) to know the file holds the run as stored.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

EVENT_LINE = re.compile(
    r'\{"run_id":"([A-Za-z0-9._:-]{1,128})","seq":([1-9][0-9]{0,17}),'
    r'"received_at":"([^"\\]*)","hash":"([0-9a-f]{64})","chunk":(.*)\}',
    re.DOTALL,
)
HEX64 = re.compile(r"[0-9a-f]{64}")
SIGNATURE_KEYS = {"algorithm", "sha256", "public_key_sha256", "value"}


class Altered(Exception):
    def __init__(self, line, why):
        super().__init__(f"line {line}: {why}")
        self.line = line


class Unreadable(Exception):
    pass


def strict_json(text):
    def no_constant(name):
        raise ValueError(name)

    def finite(number):
        value = float(number)
        if value in (float("inf"), float("-inf")):
            raise ValueError(number)
        return value

    return json.loads(text, parse_constant=no_constant, parse_float=finite)


def header(data):
    end = data.find(b"\n")
    first = data if end < 0 else data[:end]
    try:
        value = strict_json(first.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise Unreadable("not an export file: line 1 is not a JSON header") from None
    if not isinstance(value, dict) or value.get("format") != "agent-replay.export":
        raise Unreadable("not an export file: line 1 is not an agent-replay.export header")
    if value.get("version") != 2:
        raise Unreadable(f"export format version {value.get('version')!r}: this script reads 2")
    runs = value.get("runs")
    if not isinstance(runs, list) or not runs:
        raise Altered(1, "the header lists no runs")
    order = []
    for run in runs:
        if not isinstance(run, dict):
            raise Altered(1, "each entry of runs must be an object")
        run_id, last_seq = run.get("run_id"), run.get("last_seq")
        if not isinstance(run_id, str) or type(last_seq) is not int or last_seq < 0:
            raise Altered(1, "a run without a run_id or a last_seq")
        if run_id in (r for r, _ in order):
            raise Altered(1, f"run {run_id!r} is listed twice")
        order.append((run_id, last_seq))
    return order, len(data) if end < 0 else end + 1


def check(data):
    """Every run's (run_id, events, head), and the signature line's fields (or None)."""
    runs, offset = header(data)
    known = {run_id for run_id, _ in runs}
    heads = []
    index, count, head = 0, 0, bytes(32)
    number = 2
    signature = None
    while offset < len(data):
        end = data.find(b"\n", offset)
        complete = end >= 0
        end = end if complete else len(data)
        raw = data[offset:end]
        if signature is not None:
            raise Altered(number, "a line after the signature line")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise Altered(number, "not UTF-8 text") from None
        if not text:
            raise Altered(number, "a blank line (an export has none)")
        if not complete and not text.endswith("}"):
            raise Altered(number, "the file ends in the middle of this line")
        if raw.startswith(b'{"signature":'):
            signature = signature_fields(number, text)
            signature["offset"] = offset
        else:
            match = EVENT_LINE.fullmatch(text)
            if match is None:
                raise Altered(number, "not an event line as an export writes it")
            line_run, seq, _, line_hash, chunk = match.groups()
            seq = int(seq)
            try:
                value = strict_json(chunk)
            except (ValueError, RecursionError):
                raise Altered(number, "the chunk is not valid JSON") from None
            if not isinstance(value, dict):
                raise Altered(number, "the chunk is not a JSON object")
            if line_run not in known:
                raise Altered(number, f"run {line_run!r} is not listed in the header")
            while True:
                if index == len(runs):
                    raise Altered(number, f"chain broken at run {line_run!r} seq {seq}: a line "
                                          "after every run's last event")
                run_id, last_seq = runs[index]
                if line_run == run_id:
                    break
                if count < last_seq:
                    raise Altered(number, f"chain broken at run {run_id!r} seq {count + 1}: "
                                          f"a line of run {line_run!r} comes instead")
                heads.append((run_id, count, head))
                index, count, head = index + 1, 0, bytes(32)
            if count + 1 > last_seq:
                raise Altered(number, f"chain broken at run {run_id!r} seq {seq}: past the "
                                      f"header's last_seq {last_seq}")
            if seq != count + 1:
                raise Altered(number, f"chain broken at run {run_id!r} seq {count + 1}: the "
                                      f"line has seq {seq}")
            head = hashlib.sha256(head + seq.to_bytes(8, "big") + chunk.encode("utf-8")).digest()
            if head.hex() != line_hash:
                raise Altered(number, f"chain broken at run {run_id!r} seq {seq}: its hash does "
                                      "not follow from its chunk and the line before")
            count = seq
        number += 1
        offset = end + 1
    end_line = signature["number"] if signature is not None else number
    while index < len(runs):
        run_id, last_seq = runs[index]
        if count < last_seq:
            raise Altered(end_line, f"chain broken at run {run_id!r} seq {count + 1}: the file "
                                    f"ends at seq {count}, the header says {last_seq}")
        heads.append((run_id, count, head))
        index, count, head = index + 1, 0, bytes(32)
    signed = None if signature is None else hashlib.sha256(data[: signature["offset"]])
    if signed is not None and signed.hexdigest() != signature["sha256"]:
        raise Altered(signature["number"], "the content before the signature line is not "
                                           "what was signed")
    return heads, signature, number


def signature_fields(number, text):
    try:
        value = strict_json(text)
    except (ValueError, RecursionError):
        raise Altered(number, "the signature line is not valid JSON") from None
    fields = value.get("signature") if isinstance(value, dict) and len(value) == 1 else None
    if not (
        isinstance(fields, dict)
        and set(fields) == SIGNATURE_KEYS
        and fields["algorithm"] == "ed25519"
        and all(isinstance(fields[k], str) for k in SIGNATURE_KEYS)
        and HEX64.fullmatch(fields["sha256"])
        and HEX64.fullmatch(fields["public_key_sha256"])
    ):
        raise Altered(number, "not a signature line as an export writes it")
    if json.dumps(value, separators=(",", ":")) != text:
        raise Altered(number, "not a signature line as an export writes it")
    return {**fields, "number": number}


def key_fingerprint(pem):
    """SHA-256 of the DER inside a PEM public key (`openssl pkey -pubin -outform DER`)."""
    body = re.search(rb"-----BEGIN PUBLIC KEY-----(.*?)-----END PUBLIC KEY-----", pem, re.DOTALL)
    if body is None:
        raise ValueError("not a PEM public key")
    return hashlib.sha256(base64.b64decode(b"".join(body.group(1).split()))).hexdigest()


def openssl_verifies(key_path, digest_hex, value_b64):
    """Whether `openssl pkeyutl -verify -rawin` accepts the signature of the digest."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise Unreadable("openssl not found: the signature cannot be checked")
    with tempfile.TemporaryDirectory() as work:
        digest, sig = os.path.join(work, "digest"), os.path.join(work, "sig")
        with open(digest, "wb") as handle:
            handle.write(bytes.fromhex(digest_hex))
        with open(sig, "wb") as handle:
            handle.write(base64.b64decode(value_b64, validate=True))
        done = subprocess.run(
            [openssl, "pkeyutl", "-verify", "-pubin", "-inkey", key_path, "-rawin",
             "-in", digest, "-sigfile", sig],
            capture_output=True,
        )
    return done.returncode == 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file")
    parser.add_argument("--public-key", metavar="PEM")
    args = parser.parse_args(argv)
    try:
        fingerprint = None
        if args.public_key is not None:
            with open(args.public_key, "rb") as handle:
                fingerprint = key_fingerprint(handle.read())
        with open(args.file, "rb") as handle:
            data = handle.read()
        heads, signature, lines = check(data)
        if fingerprint is not None:
            if signature is None:
                raise Altered(lines, "the file is unsigned but a key was given")
            if signature["public_key_sha256"] != fingerprint:
                raise Altered(signature["number"], "signed by another key")
            try:
                valid = openssl_verifies(args.public_key, signature["sha256"], signature["value"])
            except binascii.Error:
                valid = False
            if not valid:
                raise Altered(signature["number"], "signature invalid")
    except Altered as exc:
        print(f"altered: {exc}", file=sys.stderr)
        return 1
    except (Unreadable, OSError, ValueError) as exc:
        print(f"unreadable: {exc}", file=sys.stderr)
        return 3
    for run_id, events, head in heads:
        print(f"run {run_id}: {events} events, head {head.hex()}")
    state = "unsigned" if signature is None else (
        "signature valid" if fingerprint else "signed, signature not checked (give --public-key)"
    )
    print(f"intact: {len(heads)} runs, every chain holds; {state}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
