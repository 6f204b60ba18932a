"""A hosted run's budget: the ceilings that end it, whoever watches it.

Four ceilings, each optional: `max_seconds` (since the run was created, by the
log's creation time), `max_events` (events its upstream streamed), `max_tool_calls`
(tool calls it started) and `max_output_tokens`. An agent's entry in
`REPLAY_AGENTS` may give one (`"budget": {...}`), and a start request may give
one (the body's `budget` or the `X-Budget` header), in either form:

    {"max_seconds": 30, "max_events": 500}          max_seconds=30,max_events=500

A request only tightens its agent's budget: the run's is the least of each
ceiling any of them gives. The run's budget is stored with it (its metadata's
`budget`), so whichever process drives or reaps it enforces the same one.

Output tokens are the ones the upstream reports (a `usage` object on any event,
`completionTokens` or `outputTokens`; reports are summed, as the run summary
sums them), plus, for the text streamed since its last report, a count of
ceil(characters / 4): no tokenizer of the agent's model is at hand, and four
characters a token is the usual rule of thumb for English text. The text is
every delta of text, reasoning and tool-call-argument events.

The `Meter` admits an upstream's events while they are within the budget; the
first that is not (and everything after it) is never stored, so a run's log
holds at most `max_events` events of its upstream and `max_tool_calls` calls.
A terminal event is always stored: it spends nothing and ends the run anyway.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Final

from agent_replay.errors import InvalidBudget
from agent_replay.event_types import TERMINAL
from agent_replay.log.chunks import loads
from agent_replay.log.values import StoredChunk

COUNTS: Final = ("max_events", "max_tool_calls", "max_output_tokens")
NAMES: Final = ("max_seconds", *COUNTS)
# A year: longer is no ceiling at all, and so large a number is more likely a mistake.
MAX_SECONDS: Final = 31_536_000.0
# Counts past this do not survive JSON's doubles in every client.
MAX_COUNT: Final = 2**53 - 1
# The characters counted as one output token when the upstream reports none.
CHARS_PER_TOKEN: Final = 4

_ITEM = re.compile(r"\s*([a-z_]+)\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*")
# Events whose `delta` is text the model produced.
_TEXT_TYPES: Final = frozenset(
    {
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CHUNK",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CHUNK",
        "THINKING_TEXT_MESSAGE_CONTENT",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_CHUNK",
    }
)
_TOOL_CALL_TYPES: Final = frozenset({"TOOL_CALL_START", "TOOL_CALL_CHUNK"})


@dataclass(frozen=True, slots=True)
class Budget:
    """Each ceiling, or None where there is none."""

    max_seconds: float | None = None
    max_events: int | None = None
    max_tool_calls: int | None = None
    max_output_tokens: int | None = None

    def __bool__(self) -> bool:
        return any(getattr(self, name) is not None for name in NAMES)

    def to_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in NAMES if getattr(self, name) is not None}

    def deadline(self, created_at: datetime) -> float | None:
        """When the run's time runs out (seconds since the epoch), if it has a time budget."""
        if self.max_seconds is None:
            return None
        return created_at.timestamp() + self.max_seconds

    def out_of_time(self, created_at: datetime, now: float) -> str | None:
        """The RUN_ERROR's message if the run's time ran out by `now`, else None."""
        deadline = self.deadline(created_at)
        if deadline is None or now < deadline:
            return None
        return exhausted("max_seconds", self.max_seconds)


NONE: Final = Budget()


def exhausted(name: str, limit: float | None) -> str:
    """The RUN_ERROR message for ceiling `name`: it names the budget and its value."""
    # As it was given: 30 for 30.0, never 3.1536e+07.
    value = str(int(limit)) if isinstance(limit, float) and limit.is_integer() else str(limit)
    why = {
        "max_seconds": "that long has passed since the run was created",
        "max_events": "its agent streamed more events",
        "max_tool_calls": "its agent started another tool call",
        "max_output_tokens": "its agent produced more output tokens",
    }[name]
    return f"the run's budget is exhausted: {name}={value} ({why})"


def _value(name: str, value: Any, where: str) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidBudget(f"{where}: {name} must be a number")
    if name == "max_seconds":
        if not math.isfinite(value) or not 0 < value <= MAX_SECONDS:
            raise InvalidBudget(
                f"{where}: max_seconds must be above 0 and at most {MAX_SECONDS:.0f}"
            )
        return float(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_COUNT:
        raise InvalidBudget(f"{where}: {name} must be a whole number from 1 to {MAX_COUNT}")
    return value


def _make(items: dict[str, Any], where: str) -> Budget:
    unknown = sorted(set(items) - set(NAMES))
    if unknown:
        shown = ", ".join(repr(name[:40]) for name in unknown[:5])
        raise InvalidBudget(f"{where}: unknown budget {shown} (known: {', '.join(NAMES)})")
    checked: dict[str, Any] = {name: _value(name, value, where) for name, value in items.items()}
    return Budget(**checked)


def parse_text(text: str, where: str = "X-Budget") -> Budget:
    """`name=value` pairs separated by commas: `max_seconds=30,max_events=500`."""
    items: dict[str, Any] = {}
    for part in text.split(","):
        match = _ITEM.fullmatch(part)
        if match is None:
            raise InvalidBudget(
                f"{where}: {part.strip()[:60]!r} is not name=number "
                "(e.g. max_seconds=30,max_events=500)"
            )
        name, number = match.group(1), match.group(2)
        if name in items:
            raise InvalidBudget(f"{where}: {name} is given twice")
        items[name] = float(number) if "." in number or name == "max_seconds" else int(number)
    return _make(items, where)


def parse(value: Any, where: str) -> Budget:
    """A budget as JSON gives it: an object `{"max_seconds": 30, ...}` or the header's text."""
    if isinstance(value, str):
        return parse_text(value, where)
    if not isinstance(value, dict):
        raise InvalidBudget(f'{where}: expected {{"max_seconds": ..., "max_events": ...}}')
    return _make(value, where)


def tighten(*budgets: Budget) -> Budget:
    """The least of each ceiling any of `budgets` gives: a request never loosens its agent's."""
    out: dict[str, Any] = {}
    for field in fields(Budget):
        given = [getattr(b, field.name) for b in budgets if getattr(b, field.name) is not None]
        out[field.name] = min(given) if given else None
    return Budget(**out)


def choose(agent_budget: Budget, body: Any, header: str | None) -> Budget:
    """The run's budget: its agent's, tightened by the body's `budget` and `X-Budget`."""
    from_body = NONE if body is None else parse(body, "budget")
    from_header = NONE if header is None else parse_text(header)
    return tighten(agent_budget, from_body, from_header)


def from_metadata(metadata: Any) -> Budget:
    """The budget stored with a run (its metadata's `budget`); none if it has none.

    What is stored was checked when the run started; anything else found there
    (a run made by appends may carry any metadata) is no budget of ours.
    """
    value = metadata.get("budget") if isinstance(metadata, dict) else None
    if not isinstance(value, dict):
        return NONE
    try:
        return _make(value, "stored budget")
    except InvalidBudget:
        return NONE


def reported_output_tokens(value: Any) -> int | None:
    """The output tokens an event's `usage` reports (TanStack's or the AG-UI spec's form)."""
    usage = value.get("usage") if isinstance(value, dict) else None
    reports = usage if isinstance(usage, list) else [usage]
    total: int | None = None
    for report in reports:
        if not isinstance(report, dict):
            continue
        count = report.get("completionTokens", report.get("outputTokens"))
        if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
            total = (total or 0) + count
    return total


class Meter:
    """Counts a run's upstream events against its budget; `admit` keeps those within it.

    One meter per driver, and a run has one driver for its life (a run whose driver
    died is closed by a reaper, never driven on), so its counts are those of the
    run's events in the log: what it admitted is exactly what was stored.
    """

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.events = 0
        self.tool_calls = 0
        self.reported_tokens = 0
        self.unreported_chars = 0
        self._calls: set[str] = set()
        self._tokens = budget.max_output_tokens is not None
        # The RUN_ERROR's message once a ceiling is passed, and that ceiling's name;
        # nothing is admitted after.
        self.exhausted: str | None = None
        self.exhausted_by: str | None = None

    @property
    def output_tokens(self) -> int:
        return self.reported_tokens + math.ceil(self.unreported_chars / CHARS_PER_TOKEN)

    def admit(self, chunks: list[StoredChunk]) -> list[StoredChunk]:
        """The leading `chunks` within the budget; at the first past it, `exhausted` is set."""
        if self.exhausted is not None:
            return []
        for index, chunk in enumerate(chunks):
            if not self._admit(chunk):
                return chunks[:index]
        return chunks

    def _admit(self, chunk: StoredChunk) -> bool:
        budget = self.budget
        kind = chunk.type
        terminal = kind in TERMINAL
        if not terminal and budget.max_events is not None and self.events + 1 > budget.max_events:
            return self._exhaust("max_events", budget.max_events)
        new_call = (
            kind in _TOOL_CALL_TYPES
            and chunk.tool_call_id is not None
            and chunk.tool_call_id not in self._calls
        )
        if (
            new_call
            and not terminal
            and budget.max_tool_calls is not None
            and self.tool_calls + 1 > budget.max_tool_calls
        ):
            return self._exhaust("max_tool_calls", budget.max_tool_calls)
        reported, chars = self.reported_tokens, self.unreported_chars
        if self._tokens and (kind in _TEXT_TYPES or '"usage"' in chunk.text):
            value = loads(chunk.text)
            delta = value.get("delta") if kind in _TEXT_TYPES else None
            if isinstance(delta, str):
                chars += len(delta)
            report = reported_output_tokens(value)
            if report is not None:
                # The report covers the text streamed so far, this event's included.
                reported, chars = reported + report, 0
            limit = budget.max_output_tokens
            tokens = reported + math.ceil(chars / CHARS_PER_TOKEN)
            if not terminal and limit is not None and tokens > limit:
                return self._exhaust("max_output_tokens", limit)
        self.events += 1
        if new_call:
            assert chunk.tool_call_id is not None
            self._calls.add(chunk.tool_call_id)
            self.tool_calls += 1
        self.reported_tokens, self.unreported_chars = reported, chars
        return True

    def _exhaust(self, name: str, limit: int) -> bool:
        self.exhausted, self.exhausted_by = exhausted(name, limit), name
        return False
