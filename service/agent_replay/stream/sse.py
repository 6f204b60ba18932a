"""Server-sent events as the service writes them: every SSE byte it sends is formatted here.

An event is its `id:`, `event:` and `data:` lines, then a blank line (the HTML standard,
"Server-sent events"); a line starting with `:` is a comment (the heartbeat), and
`retry:` sets a browser's reconnect delay. A client strips one space after a field's
colon, so fields are written with that space: a value that starts with a space keeps it.
Durable Streams' conformance suite expects `data:` directly followed by the value, so a
`tight` frame leaves the space out of each `data:` line that does not start with a space.

Data is written one of two ways:

* `frame`: any text, a `data:` line per line of it (the client joins them with LF);
* `json_frame`, `json_frames`: JSON text on one `data:` line. A raw CR or LF can only sit
  in JSON text as whitespace between tokens (inside strings they are escaped), so each
  becomes a space: the value is the same, and a reader taking one line per event works.

An id is a seq (on a thread's stream, `<run_id>:<seq>`); an event name cannot hold a
line break, so one becomes a space.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_LINE_BREAK = re.compile(r"[\r\n]")
_LINES = re.compile(r"\r\n|\r|\n")


def one_line(text: str) -> str:
    return _LINE_BREAK.sub(" ", text)


def _head(id: int | str | None, event: str | None) -> str:
    head = "" if id is None else f"id: {id}\n"
    return f"{head}event: {one_line(event)}\n" if event else head


def _data(line: str, tight: bool) -> str:
    return f"data:{line}\n" if tight and not line.startswith(" ") else f"data: {line}\n"


def frame(
    data: str, *, id: int | str | None = None, event: str | None = None, tight: bool = False
) -> str:
    """One event whose data is any text."""
    lines = _LINES.split(data) if "\n" in data or "\r" in data else (data,)
    return _head(id, event) + "".join([_data(line, tight) for line in lines]) + "\n"


def json_frame(
    text: str, *, id: int | str | None = None, event: str | None = None, tight: bool = False
) -> str:
    """One event whose data is JSON text."""
    return f"{_head(id, event)}{_data(one_line(text), tight)}\n"


def json_frames(rows: Sequence[tuple[int, str]]) -> str:
    """Many events at once, each a stored chunk's JSON text under its seq as the id."""
    text = "".join([f"id: {seq}\ndata: {chunk}\n\n" for seq, chunk in rows])
    # Three newlines per event exactly when no chunk carries a raw line break:
    # one C-speed count instead of a check per chunk.
    if text.count("\n") != 3 * len(rows) or "\r" in text:
        text = "".join([f"id: {seq}\ndata: {one_line(chunk)}\n\n" for seq, chunk in rows])
    return text


def id_only(id: int | str) -> str:
    """A frame that moves the client's last event id without an event: the standard
    dispatches nothing for an empty data buffer."""
    return f"id: {id}\n\n"


def retry(milliseconds: int) -> str:
    """The reconnect delay a browser's EventSource honours."""
    return f"retry: {milliseconds}\n\n"


def comment(text: str) -> str:
    """A comment (a heartbeat: clients ignore it), a `:` line per line of `text`."""
    return "".join([f": {line}\n" for line in _LINES.split(text)]) + "\n"
