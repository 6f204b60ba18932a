"""The format switch: a transcript as Markdown, JSON or HTML."""

from __future__ import annotations

from collections.abc import Callable

from agent_replay.transcript.blocks import readable
from agent_replay.transcript.document import Transcript
from agent_replay.transcript.html import html
from agent_replay.transcript.jsonfmt import as_json
from agent_replay.transcript.markdown import markdown

FORMATS = ("markdown", "json", "html")

_RENDERERS: dict[str, Callable[[Transcript], str]] = {
    "markdown": markdown,
    "json": as_json,
    "html": html,
}


def render(transcript: Transcript, fmt: str) -> str:
    """The transcript as UTF-8 can hold it: a lone surrogate anywhere (a tool name, a call
    id, an error: JS producers split emoji between deltas) is U+FFFD, never a failure to
    encode. The JSON format has none left: it writes them as escapes, exactly."""
    return readable(_RENDERERS[fmt](transcript))
