"""`?view=decoded`: a run's events with the typewriter decoder's output beside them.

Each frame's data is one JSON object, `{"seq", "chunk", "decoded"?}`: the
stored chunk, and after a `TOOL_CALL_ARGS` (or `TOOL_CALL_END`) what the
decoder made of it (`agent_replay.projector.typewriter.ToolCalls`), so a browser
shows arguments as they stream without re-parsing them. The decoder keeps
state across events, so a follower resuming at seq N is first primed with the
run's tool-call events up to N (read, not sent).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Sequence
from typing import Any

import orjson

from agent_replay.log import Reads
from agent_replay.log.chunks import dumps
from agent_replay.log.typefilter import TypeFilter
from agent_replay.projector.typewriter import ToolCalls
from agent_replay.stream import sse
from agent_replay.stream.framing import Encoding, Row
from agent_replay.stream.sse import one_line

_TOOL_TYPES = frozenset({"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"})
_PRIME_PAGE = 1000


def _loads(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        # orjson refuses lone surrogates, which the log keeps as they were sent.
        return json.loads(text)


class DecodedFramer:
    """Stateful (`key` None): called once per row, in seq order, by one follower."""

    def __init__(
        self, encoding: Encoding, types: TypeFilter | None, named: bool, prefix: str = ""
    ) -> None:
        # Written before each seq in the ids (a thread's stream: `<run_id>:`).
        self._prefix = prefix
        self._encoding = encoding
        self._types = types
        self._named = named and encoding is Encoding.SSE
        self._calls = ToolCalls()

    @property
    def key(self) -> Hashable | None:
        return None

    def observe(self, text: str) -> tuple[str, dict[str, Any] | None]:
        chunk = _loads(text)
        if not isinstance(chunk, dict):
            return "", None
        kind = chunk.get("type")
        return (kind if isinstance(kind, str) else ""), self._calls.observe(chunk)

    async def prime(self, log: Reads, run_id: str, through: int) -> None:
        """Feed the run's events up to `through` to the decoder without framing them.

        Read through the log's API, which also stitches a fork's prefix from its source.
        """
        after = 0
        while after < through:
            events = await log.read_events(run_id, after, min(_PRIME_PAGE, through - after))
            for event in events:
                if event.type in _TOOL_TYPES:
                    self.observe(event.chunk)
            if not events:
                return
            after = events[-1].seq

    def frame(self, rows: Sequence[Row]) -> bytes:
        return self.frame_with(rows, "")

    def frame_with(self, rows: Sequence[Row], suffix: str) -> bytes:
        """`suffix` goes after each seq in the ids (a thread's stream: the other runs'
        places, `agent_replay.stream.threadcursor`)."""
        parts: list[str] = []
        skipped = False
        for seq, text in rows:
            kind, decoded = self.observe(text)
            skipped = self._types is not None and not self._types.matches(kind)
            if skipped:
                continue
            extra = f',"decoded":{dumps(decoded)}' if decoded is not None else ""
            data = f'{{"seq":{seq},"chunk":{one_line(text)}{extra}}}'
            if self._prefix and self._encoding is Encoding.NDJSON:
                # A line has no other id: the thread's cursor, as in the plain lines.
                data = f'{{"id":"{self._prefix}{seq}{suffix}",{data[1:]}'
            if self._encoding is Encoding.SSE:
                id = f"{self._prefix}{seq}{suffix}" if self._prefix else seq
                parts.append(sse.json_frame(data, id=id, event=kind if self._named else None))
            else:
                parts.append(data + "\n")
        if skipped and rows and self._encoding is Encoding.SSE:
            last = rows[-1][0]
            parts.append(sse.id_only(f"{self._prefix}{last}{suffix}" if self._prefix else last))
        return "".join(parts).encode()
