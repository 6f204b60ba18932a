"""What each UIMessage part shows in a transcript, independent of layout.

A part becomes a `Block`: a kind, a heading, and sections of prose or code
(tool arguments and results pretty-printed when they are JSON). The
renderers only decide how blocks look.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import partial_json_parser

from agent_replay.projector.jsvalues import JSONParseError, JSONTooDeep, parse_json

_LONE_SURROGATE = re.compile(r"[\ud800-\udfff]")


def readable(text: str) -> str:
    """Text a UTF-8 file can hold: a surrogate half left unpaired by a cut
    delta becomes U+FFFD (the JSON format keeps it exactly)."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def pretty(value: Any) -> str:
    """JSON pretty-printed; a string holding JSON is parsed first."""
    if isinstance(value, str):
        try:
            value = parse_json(value)
        except JSONParseError:
            return readable(value)
    return readable(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _arguments(text: Any) -> Section:
    """A call's arguments; when the stream stopped mid-arguments (a run that
    failed or was cancelled), what did arrive, completed by partial-json-parser
    so a reader sees the fields rather than a cut string."""
    if not isinstance(text, str):
        return Section("Arguments", pretty(text), code=True)
    try:
        return Section("Arguments", pretty(parse_json(text)), code=True)
    except JSONTooDeep:
        return Section("Arguments", readable(text), code=True)  # shown as they were sent
    except JSONParseError:
        pass
    try:
        value = partial_json_parser.loads(text)
    except Exception:  # the library raises several kinds on text it cannot read
        return Section("Arguments (incomplete)", readable(text), code=True)
    return Section("Arguments (incomplete, as far as they arrived)", pretty(value), code=True)


@dataclass(frozen=True, slots=True)
class Section:
    label: str | None
    text: str
    code: bool = False


@dataclass(frozen=True, slots=True)
class Block:
    kind: str  # text, reasoning, tool-call, tool-result, structured, resource, media, other
    title: str = ""
    name: str | None = None  # the tool (or call id) the title is about
    sections: list[Section] = field(default_factory=list)
    error: str | None = None
    time: datetime | None = None
    status: str | None = None


def _tool_call(part: dict[str, Any], shown_results: set[str], time: datetime | None) -> Block:
    sections = [_arguments(part.get("arguments", ""))]
    output = part.get("output")
    if output is not None and part.get("id") not in shown_results:
        sections.append(Section("Result", pretty(output), code=True))
    approval = part.get("approval")
    if isinstance(approval, dict):
        answer = approval.get("approved")
        state = "pending" if answer is None else ("approved" if answer else "denied")
        sections.append(Section("Approval", f"{state} (request {approval.get('id')})"))
    return Block(
        "tool-call",
        "Tool call",
        str(part.get("name") or "(unnamed)"),
        sections,
        time=time,
        status=str(part.get("state", "")),
    )


def _tool_result(part: dict[str, Any], time: datetime | None) -> Block:
    error = part.get("error")
    return Block(
        "tool-result",
        "Tool result for",
        str(part.get("toolCallId")),
        [Section(None, pretty(part.get("content", "")), code=True)],
        error=str(error) if error else None,
        time=time,
        status=str(part.get("state", "")),
    )


def _structured(part: dict[str, Any]) -> Block:
    status = str(part.get("status", ""))
    value = part.get("data") if status == "complete" else part.get("partial", part.get("raw"))
    sections = [Section(None, pretty(value if value is not None else part.get("raw", "")), True)]
    if part.get("reasoning"):
        sections.append(Section("Reasoning", readable(str(part["reasoning"]))))
    message = part.get("errorMessage")
    error = str(message) if message else None
    return Block("structured", "Structured output", None, sections, error=error, status=status)


def _media_source(part: dict[str, Any]) -> Any:
    """A media part's source, with inline data described rather than embedded
    (the transcript stays small and loads nothing)."""
    source = part.get("source")
    if not isinstance(source, dict):
        return part
    value = source.get("value")
    if source.get("type") != "url" and isinstance(value, str):
        return {**source, "value": f"<{len(value)} characters of inline data>"}
    return source


def blocks(
    message: dict[str, Any],
    *,
    shown_results: set[str],
    call_times: dict[str, datetime],
    result_times: dict[str, datetime],
) -> list[Block]:
    """The blocks of one message. `shown_results`: tool calls whose result has
    its own tool-result part somewhere, so the call does not repeat it."""
    out: list[Block] = []
    for part in message.get("parts", []):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text":
            text = readable(str(part.get("content", "")))
            out.append(Block("text", sections=[Section(None, text)]))
        elif kind == "thinking":
            text = readable(str(part.get("content", "")))
            out.append(Block("reasoning", "Reasoning", None, [Section(None, text)]))
        elif kind == "tool-call":
            out.append(_tool_call(part, shown_results, call_times.get(str(part.get("id")))))
        elif kind == "tool-result":
            out.append(_tool_result(part, result_times.get(str(part.get("toolCallId")))))
        elif kind == "structured-output":
            out.append(_structured(part))
        elif kind == "ui-resource":
            resource = part.get("resource") or {}
            about = f"{resource.get('uri')} ({resource.get('mimeType')})"
            tool = str(part.get("toolName"))
            out.append(
                Block("resource", "UI resource from", tool, [Section(None, readable(about))])
            )
        elif kind in ("image", "audio", "video", "document"):
            media = [Section(None, pretty(_media_source(part)), True)]
            out.append(Block("media", str(kind).capitalize(), None, media))
        else:
            out.append(Block("other", "Part", str(kind), [Section(None, pretty(part), True)]))
    return out


def result_ids(messages: list[dict[str, Any]]) -> set[str]:
    return {
        str(part.get("toolCallId"))
        for message in messages
        for part in message.get("parts", [])
        if isinstance(part, dict) and part.get("type") == "tool-result"
    }
