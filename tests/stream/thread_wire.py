"""Test-side readers of a thread stream's wire formats, strict about framing.

Each yields items `(cursor, kind, data)`: kind "run" for an announcement (data
the run id), "event" for a run's event (data the chunk's JSON text, compact for
NDJSON), "skip" for an id-only SSE frame (data empty).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

Item = tuple[str, str, str]


@dataclass
class ThreadSseReader:
    """Feeds raw bytes; keeps only complete frames (a cut connection loses the partial one)."""

    items: list[Item] = field(default_factory=list)
    comments: int = 0
    retry: int = 0
    _buffer: bytes = b""

    def feed(self, data: bytes) -> list[Item]:
        self._buffer += data
        *blocks, self._buffer = self._buffer.split(b"\n\n")
        new: list[Item] = []
        for block in blocks:
            lines = block.decode().split("\n")
            if all(line.startswith(":") for line in lines):
                self.comments += 1
                continue
            if len(lines) == 1 and lines[0].startswith("retry: "):
                self.retry += 1
                continue
            fields: dict[str, str] = {}
            for line in lines:
                name, _, value = line.partition(": ")
                assert name in ("id", "event", "data") and name not in fields, block
                fields[name] = value
            assert "id" in fields, f"every frame of a thread stream has an id: {block!r}"
            if fields.get("event") == "run":
                announced = json.loads(fields["data"])
                assert set(announced) == {"run_id"}, block
                new.append((fields["id"], "run", announced["run_id"]))
            elif "data" in fields:
                assert "event" not in fields, block
                new.append((fields["id"], "event", fields["data"]))
            else:
                new.append((fields["id"], "skip", ""))
        self.items.extend(new)
        return new


@dataclass
class ThreadNdjsonReader:
    items: list[Item] = field(default_factory=list)
    blank_lines: int = 0
    _buffer: bytes = b""

    def feed(self, data: bytes) -> list[Item]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        new: list[Item] = []
        for line in lines:
            if not line.strip():
                self.blank_lines += 1
                continue
            value: dict[str, Any] = json.loads(line)
            assert isinstance(value.get("id"), str), line
            if "run" in value:
                assert set(value) == {"id", "run"} and set(value["run"]) == {"run_id"}, line
                new.append((value["id"], "run", value["run"]["run_id"]))
            else:
                assert set(value) == {"id", "chunk"}, line
                chunk = json.dumps(value["chunk"], separators=(",", ":"))
                new.append((value["id"], "event", chunk))
        self.items.extend(new)
        return new


def split_cursor(cursor: str) -> tuple[str, int]:
    """A frame's own run and seq: its id's first entry (`<run_id>:<seq>`, then `~<entry>`
    for each other run followed; a run id may hold colons, a seq never does)."""
    run_id, _, seq = cursor.partition("~")[0].rpartition(":")
    return run_id, int(seq)
