"""``project FILE [--snapshots] [--normalize]``: print the projection.

The file (``-``: standard input) holds one AG-UI chunk per line, or one JSON
array of chunks (what ``jq -s`` or a log viewer writes), or is an export: a header object
with a ``"format"`` key (and no ``"type"``) followed by ``{"run_id", "seq",
"received_at", "hash", "chunk"}`` envelopes (``hash`` since version 2) and, in a signed
export, a last ``{"signature"}`` line, which is not a chunk and is skipped. Lines are split
on "\\n" only (JSON text may hold raw U+2028/U+0085, which ``str.splitlines`` would split
on); blank lines are skipped.

Output: the final ``UIMessage[]`` as JSON, or with ``--snapshots`` one
compact line per chunk ``{"index", "type", "messages"}`` and a last line
``{"index": "finalize", "messages"}``. Exit status 2 on unreadable input.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import Any

from agent_replay.projector import Projector
from agent_replay.projector.jsvalues import MAX_DEPTH, UNDEF, JSONParseError, parse_json, stringify

# An export line's envelope, or the array around the chunks, adds a level to a chunk's own.
_FILE_DEPTH = MAX_DEPTH + 1


class InputError(Exception):
    pass


def read_chunks(text: str) -> Iterator[dict[str, Any]]:
    """The chunks of a JSONL log, a JSON array of chunks, or an export file."""
    if text.lstrip().startswith("["):
        yield from _array(text)
        return
    export = None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = parse_json(line, max_depth=_FILE_DEPTH)
        except JSONParseError as exc:
            raise InputError(f"line {number}: not valid JSON ({exc})") from exc
        if not isinstance(value, dict):
            raise InputError(f"line {number}: expected a JSON object")
        if export is None:
            export = "format" in value and "type" not in value
            if export:
                continue  # the export header
        if export:
            if "signature" in value and "chunk" not in value:
                continue  # a signed export's last line
            chunk = value.get("chunk")
            if not isinstance(chunk, dict):
                raise InputError(f"line {number}: export envelope without a chunk object")
            value = chunk
        yield value


def _array(text: str) -> Iterator[dict[str, Any]]:
    try:
        value = parse_json(text, max_depth=_FILE_DEPTH)
    except JSONParseError as exc:
        raise InputError(f"not a valid JSON array ({exc})") from exc
    if not isinstance(value, list):
        raise InputError("expected a JSON array of chunk objects")
    for index, item in enumerate(value):
        if not isinstance(item, dict):
            raise InputError(f"item {index}: expected a JSON object")
        yield item


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.buffer.read().decode("utf-8")
    with open(name, encoding="utf-8", newline="") as handle:
        return handle.read()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="project", description=__doc__.splitlines()[0])
    parser.add_argument("file", help="JSONL log, JSON array of chunks, or export file; - for stdin")
    parser.add_argument(
        "--snapshots", action="store_true", help="print the messages after every chunk"
    )
    parser.add_argument(
        "--normalize", action="store_true", help="apply legacy server normalization"
    )
    args = parser.parse_args(argv)
    try:
        chunks = list(read_chunks(_read(args.file)))
    except (OSError, UnicodeDecodeError, InputError) as exc:
        print(f"project: {args.file}: {exc}", file=sys.stderr)
        return 2
    projector = Projector(normalize=args.normalize)
    out = sys.stdout.buffer

    def emit(value: Any) -> None:
        out.write(stringify(value).encode("utf-8") + b"\n")

    for index, chunk in enumerate(chunks):
        projector.apply(chunk)
        if args.snapshots:
            emit({"index": index, "type": chunk.get("type", UNDEF), "messages": projector.messages})
    projector.finalize()
    if args.snapshots:
        emit({"index": "finalize", "messages": projector.messages})
    else:
        emit(projector.messages)
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
