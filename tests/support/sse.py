"""A test-side SSE reader that follows the HTML standard's parsing rules ("Server-sent
events", interpreting an event stream), to read what the service writes as a browser does."""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINES = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Event:
    data: str
    event: str  # "message" when the frame names none
    last_id: str


@dataclass
class Parsed:
    events: list[Event]
    comments: list[str]
    retry: list[int]
    last_id: str  # after the whole stream, dispatched or not


def parse(text: str) -> Parsed:
    """Every event dispatched by a complete stream `text` (a trailing partial one is lost)."""
    events: list[Event] = []
    comments: list[str] = []
    retry: list[int] = []
    data: list[str] = []
    event = ""
    last_id = ""
    *lines, _partial = _LINES.split(text)
    for line in lines:
        if line == "":
            if data:
                events.append(Event("\n".join(data), event or "message", last_id))
            data, event = [], ""
            continue
        if line.startswith(":"):
            comments.append(line[1:].removeprefix(" "))
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
        elif name == "id" and "\0" not in value:
            last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry.append(int(value))
    return Parsed(events, comments, retry, last_id)
