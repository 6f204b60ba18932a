"""A stream for one audience: only the chunk types it asked for, optionally named.

    ?types=TEXT_MESSAGE_*,TOOL_CALL_START    only matching chunks
    ?events=named                            SSE `event: <chunk type>` on each frame

Each frame sent keeps its own seq as the SSE id (the NDJSON `id`), so a
client resuming with the last id it saw gets exactly the matching events
after it: the follower's cursor moves over skipped events as over sent ones
(`agent_replay.stream.tail`), and a resume re-applies the same filter from there.
An SSE page whose last events were filtered out ends with an id-only frame,
so the client's id moves past what was skipped too.
The filter is stateless, so one framing of a buffered page serves every
follower with the same options.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import orjson

from agent_replay.log.typefilter import TypeFilter
from agent_replay.stream import sse
from agent_replay.stream.framing import Encoding, Framer, Row
from agent_replay.stream.sse import one_line


def chunk_type(text: str) -> str:
    """The stored chunk's `type` ('' when it has none, which ingest does not let in)."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses lone surrogates, which the log keeps as they were sent.
        value = json.loads(text)
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else ""


@dataclass(frozen=True, slots=True)
class AudienceFramer:
    encoding: Encoding
    types: TypeFilter | None = None
    named: bool = False
    # Written before each seq in the ids: a thread's stream names the run
    # (`<run_id>:`, agent_replay.stream.thread).
    prefix: str = ""

    @property
    def key(self) -> Hashable:
        return self

    def frame(self, rows: Sequence[Row]) -> bytes:
        return self.frame_with(rows, "")

    def frame_with(self, rows: Sequence[Row], suffix: str) -> bytes:
        """`suffix` goes after each seq in the ids (a thread's stream: the other runs'
        places, `agent_replay.stream.threadcursor`)."""
        types = self.types
        named = self.named and self.encoding is Encoding.SSE
        parts: list[str] = []
        sse_out = self.encoding is Encoding.SSE
        skipped = False
        prefix = self.prefix
        for seq, chunk in rows:
            kind = chunk_type(chunk) if types is not None or named else ""
            if types is not None and not types.matches(kind):
                skipped = True
                continue
            skipped = False
            id = f"{prefix}{seq}{suffix}" if prefix else seq
            if sse_out:
                parts.append(sse.json_frame(chunk, id=id, event=kind if named else None))
            else:
                parts.append(f'{{"id":"{id}","chunk":{one_line(chunk)}}}\n')
        if skipped and sse_out:
            # A browser's EventSource then reconnects after the skipped events (and
            # gets 204 once the run is closed) instead of re-reading them each time.
            last = rows[-1][0]
            parts.append(sse.id_only(f"{prefix}{last}{suffix}" if prefix else last))
        return "".join(parts).encode()


def audience_framer(encoding: Encoding, types: TypeFilter | None, named: bool) -> Framer:
    """The plain encoding when nothing is filtered or named (its fast path), else a filter."""
    if (types is None or types.everything) and not (named and encoding is Encoding.SSE):
        return encoding
    return AudienceFramer(encoding, None if types is None or types.everything else types, named)
