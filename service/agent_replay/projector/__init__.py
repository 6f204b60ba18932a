"""The projector: AG-UI chunks in, TanStack AI ``UIMessage[]`` out.

A pure reducer with the semantics of ``StreamProcessor`` from npm
``@tanstack/ai`` 0.58.0 as ``ChatClient`` drives it (spec:
shared/spec/projector.md). No I/O, no clock, no randomness: generated ids
are functions of chunk positions, and a message the projector creates takes
its ``createdAt`` from the latest chunk ``timestamp``.

    projector = Projector()
    for chunk in log:
        projector.apply(chunk)
        render(projector.messages)   # current state, not finalized
    projector.finalize()             # end of the log

    messages = project(log)          # the same in one call

Module map: ``handlers``/``tool_handlers``/``snapshot`` (one function per
event) act on ``processor.StreamState`` (routing tables, shared moves) and
``draft`` (per-message stream state), write parts through the pure
``updaters``, into ``model.Message`` (render cache). ``jsvalues`` and
``partial_json`` reproduce the JavaScript rules the reference inherits;
``buffers`` keeps streamed strings cheap.

Rendered messages are shared with later reads until they change: treat
them as read-only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_replay.projector.handlers import HANDLERS
from agent_replay.projector.jsvalues import tanstack_bag
from agent_replay.projector.normalize import normalize_chunk
from agent_replay.projector.processor import StreamState

__all__ = ["Projector", "project"]

# Bag keys ChatClient's restoreInboundChunk does not lift to the top level.
_NOT_LIFTED = frozenset({"usage", "interruptErrors"})


def _restore_inbound(chunk: dict[str, Any]) -> dict[str, Any]:
    """``restoreInboundChunk`` (spec §3), on a copy: the caller's dict is left alone."""
    if "metadata" not in chunk and "tanstack" not in chunk:
        return chunk
    bag = tanstack_bag(chunk)
    if not bag:
        return chunk
    missing = {k: v for k, v in bag.items() if k not in chunk and k not in _NOT_LIFTED}
    return {**chunk, **missing} if missing else chunk


class Projector:
    """Incremental projection of one log.

    ``id_prefix`` starts every id the projector has to invent (followed by
    the position of the chunk that caused it), so ids are deterministic and
    can be kept apart from the producer's.
    """

    def __init__(self, *, normalize: bool = False, id_prefix: str = "gen-") -> None:
        self._state = StreamState(id_prefix)
        self._normalize = normalize
        self._position = 0

    def apply(self, chunk: dict[str, Any]) -> None:
        """Apply the next chunk of the log."""
        position = self._position
        self._position += 1
        if not isinstance(chunk, dict):
            return
        st = self._state
        st.begin_chunk(position, chunk.get("timestamp"))
        for item in normalize_chunk(chunk) if self._normalize else (chunk,):
            kind = item.get("type")
            handler = HANDLERS.get(kind) if type(kind) is str else None
            if handler is not None:
                handler(st, _restore_inbound(item))

    def finalize(self) -> None:
        """End of the log: complete open calls, error unfinished structured
        outputs, drop a whitespace-only last assistant message."""
        self._state.finalize()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The current ``UIMessage[]`` (JSON-ready dicts), not finalized."""
        return [message.render() for message in self._state.messages]


def project(
    chunks: Iterable[dict[str, Any]],
    *,
    normalize: bool = False,
    finalize: bool = True,
    id_prefix: str = "gen-",
) -> list[dict[str, Any]]:
    """Project a whole log; the same result as applying it chunk by chunk."""
    projector = Projector(normalize=normalize, id_prefix=id_prefix)
    for chunk in chunks:
        projector.apply(chunk)
    if finalize:
        projector.finalize()
    return projector.messages
