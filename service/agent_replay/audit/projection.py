"""A stored run's projection: its chunks through the projector, deterministically.

Pure: chunk texts in, `UIMessage` dicts out. Chunks are parsed with the
projector's JavaScript `JSON.parse` semantics (the reference client parses
the same text), and ids the projector has to invent are scoped by run so a
thread's runs never collide.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_replay.projector import project
from agent_replay.projector.jsvalues import parse_chunk, parse_json, stringify

# Part of every cached projection's key: bump it when the projector's output
# for a given log changes, and cached projections are rebuilt on next read.
PROJECTOR_VERSION = "1"


def id_prefix(run_id: str) -> str:
    return f"gen-{run_id}-"


def project_run(
    run_id: str, chunk_texts: Iterable[str], *, normalize: bool = False, finalize: bool = True
) -> list[dict[str, Any]]:
    return project(
        (parse_chunk(text) for text in chunk_texts),
        normalize=normalize,
        finalize=finalize,
        id_prefix=id_prefix(run_id),
    )


def messages_json(messages: list[dict[str, Any]]) -> str:
    """JSON text as the reference serializes it (lone surrogates escaped, ±Infinity null)."""
    return stringify(messages)


def parse_messages(text: str) -> list[dict[str, Any]]:
    # Our own output: values in it are bounded already, some nested inside messages.
    value = parse_json(text, max_depth=None)
    assert isinstance(value, list), "cached projections are arrays"
    return value
