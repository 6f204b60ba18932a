"""How `agent-replay tail` shows a run: a typewriter for text, reasoning and tool arguments.

`Pretty` turns chunks (with the typewriter decoder's pieces beside tool-call
arguments) into writes on an `Output`: text deltas as they come, reasoning
dimmed, a header per tool call followed by its argument values typed out
decoded, results, errors. Colours come from `rich` on a terminal; piped, the
same text is written plain. `--raw` and `--json` bypass this module.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.text import Text

_PREVIEW = 300


class Output(Protocol):
    def write(self, text: str, style: str | None = None) -> None: ...


class PlainOutput:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str, style: str | None = None) -> None:
        self._stream.write(text)
        self._stream.flush()


class RichOutput:
    def __init__(self, console: Console) -> None:
        self._console = console

    def write(self, text: str, style: str | None = None) -> None:
        # soft_wrap: the terminal wraps long lines itself; rich must not insert
        # breaks into text that arrives a few characters at a time.
        self._console.print(Text(text, style=style or ""), end="", soft_wrap=True)
        self._console.file.flush()


def _label(path: str) -> str:
    if not path:
        return "value"
    return path[1:].replace("~1", "/").replace("~0", "~")


def _compact(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= _PREVIEW else text[:_PREVIEW] + "…"


class Pretty:
    """One run's chunks, in seq order, onto an `Output`."""

    def __init__(self, out: Output) -> None:
        self._out = out
        self._line_start = True
        # What the last write belonged to: "text", "reasoning", or a tool call id.
        self._mode: str | None = None
        self._names: dict[str, str] = {}
        self._paths: dict[str, str] = {}

    def _write(self, text: str, style: str | None = None) -> None:
        if text:
            self._out.write(text, style)
            self._line_start = text.endswith("\n")

    def _newline(self) -> None:
        if not self._line_start:
            self._write("\n")

    def _enter(self, mode: str) -> bool:
        """Switch to `mode`; True when it is new (the caller writes a header)."""
        if self._mode == mode:
            return False
        self._newline()
        self._mode = mode
        return True

    def chunk(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        kind = chunk.get("type")
        write = WRITERS.get(kind) if isinstance(kind, str) else None
        if write is not None:
            write(self, chunk, decoded)

    def _text(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        delta = chunk.get("delta")
        if isinstance(delta, str):
            self._enter("text")
            self._write(delta)

    def _text_end(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        self._newline()

    def _reasoning(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        # Also STEP_FINISHED: legacy thinking steps carry their text there.
        delta = chunk.get("delta")
        if isinstance(delta, str):
            if self._enter("reasoning"):
                self._write("thinking: ", "dim italic")
            self._write(delta, "dim")

    def _tool_start(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        call_id = str(chunk.get("toolCallId", ""))
        name = chunk.get("toolCallName") or chunk.get("toolName") or "tool"
        self._names[call_id] = str(name)
        self._enter(call_id)
        self._write(f"▶ {name}", "bold cyan")
        self._write(f"  ({call_id})\n", "cyan")

    def _tool_args(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        if decoded is not None:
            self._arguments(decoded)

    def _tool_end(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        if decoded is not None:
            self._arguments(decoded)
            self._newline()

    def _tool_result(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        call_id = str(chunk.get("toolCallId", ""))
        self._enter(f"result:{call_id}")
        self._write(f"◀ {self._names.get(call_id, 'result')}", "bold green")
        self._write(f"  ({call_id}): ", "green")
        self._write(_compact(chunk.get("content")) + "\n")

    def _run_error(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        self._enter("error")
        code = chunk.get("code")
        message = chunk.get("message") or "run error"
        self._write(f"✖ {message}" + (f" [{code}]" if code else "") + "\n", "bold red")

    def _custom(self, chunk: dict[str, Any], decoded: dict[str, Any] | None) -> None:
        self._enter("custom")
        value = chunk.get("value")
        extra = f" {_compact(value)}" if value is not None else ""
        self._write(f"· {chunk.get('name', 'custom')}{extra}\n", "dim")
        self._mode = None

    def _arguments(self, decoded: dict[str, Any]) -> None:
        call_id = str(decoded.get("toolCallId", ""))
        for piece in decoded.get("pieces", ()):
            path = piece["path"]
            if self._enter(call_id):
                self._write(f"▶ {self._names.get(call_id, 'tool')}", "bold cyan")
                self._write(f"  ({call_id}, continued)\n", "cyan")
                self._paths.pop(call_id, None)
            if self._paths.get(call_id) != path:
                self._newline()
                self._paths[call_id] = path
                self._write(f"  {_label(path)}: ", "bold")
            if "text" in piece:
                self._write(piece["text"])
            else:
                self._write(json.dumps(piece["value"]), "magenta")
        if decoded.get("error"):
            self._newline()
            self._write(f"  (arguments are not JSON: {decoded['error']})\n", "yellow")

    def summary(self, run: dict[str, Any], events: int | None) -> None:
        self._newline()
        status = str(run.get("status", "?"))
        style = {"finished": "bold green", "error": "bold red"}.get(status, "bold yellow")
        parts = [f"events {events if events is not None else run.get('last_seq')}"]
        seconds = _seconds(run)
        if seconds is not None:
            parts.append(f"{seconds:.1f} s")
        self._write("— run ", "dim")
        self._write(str(run.get("run_id", "")), "bold")
        self._write(f" {status}", style)
        self._write(" · " + " · ".join(parts) + "\n", "dim")


# Exactly the types the catalog (agent_replay.event_types) gives Reader.TAIL.
WRITERS: dict[str, Callable[[Pretty, dict[str, Any], dict[str, Any] | None], None]] = {
    "TEXT_MESSAGE_CONTENT": Pretty._text,
    "TEXT_MESSAGE_CHUNK": Pretty._text,
    "TEXT_MESSAGE_END": Pretty._text_end,
    "REASONING_MESSAGE_CONTENT": Pretty._reasoning,
    "REASONING_MESSAGE_CHUNK": Pretty._reasoning,
    "THINKING_TEXT_MESSAGE_CONTENT": Pretty._reasoning,
    "STEP_FINISHED": Pretty._reasoning,
    "TOOL_CALL_START": Pretty._tool_start,
    "TOOL_CALL_ARGS": Pretty._tool_args,
    "TOOL_CALL_END": Pretty._tool_end,
    "TOOL_CALL_RESULT": Pretty._tool_result,
    "RUN_ERROR": Pretty._run_error,
    "CUSTOM": Pretty._custom,
}


def _seconds(run: dict[str, Any]) -> float | None:
    created, closed = run.get("created_at"), run.get("closed_at")
    if not (isinstance(created, str) and isinstance(closed, str)):
        return None
    try:
        return (datetime.fromisoformat(closed) - datetime.fromisoformat(created)).total_seconds()
    except ValueError:
        return None
