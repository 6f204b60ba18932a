"""An import's runs redacted by the importing service's rules, as its appends would be.

An export may come from a service with other rules (or none): what it holds is stored text
like any producer's, so `REPLAY_REDACT` applies to it before the log sees it. Each run is fed
to a `Redactor` whole, event by event in order, and released at its end, so a secret split
over any number of deltas is found as on a hosted run. An event keeps its own receive time;
text released with a later event (a delta held whole, a message's last text at its END)
takes that event's. A run where nothing matched is loaded as it came, seqs and all; a run
with a match is renumbered 1..n (a delta held whole is no event of its own), which the
import reports.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from agent_replay.ingest.redact import Redactor, Rules
from agent_replay.log.chunks import dumps, loads
from agent_replay.log.values import LoadedRun, LoggedEvent, RunRecord


def redact_loaded(
    runs: Sequence[LoadedRun], rules_for: Callable[[RunRecord], Rules | None]
) -> tuple[list[LoadedRun], list[str]]:
    """Each run as the log may store it (its counts in `redactions`), and the ids of the
    runs whose events changed."""
    out: list[LoadedRun] = []
    changed: list[str] = []
    for run in runs:
        rules = rules_for(run.record)
        redacted = run if rules is None else _redacted(run, rules)
        if redacted is not run:
            changed.append(run.record.run_id)
        out.append(redacted)
    return out, changed


def _redacted(run: LoadedRun, rules: Rules) -> LoadedRun:
    redactor = Redactor(rules)
    events: list[LoggedEvent] = []
    for event in run.events:
        chunks = redactor.chunks([event.chunk])
        events.extend(LoggedEvent(chunk, event.received_at) for chunk in chunks)
    tail = redactor.finish()
    if tail:
        at = run.events[-1].received_at
        events.extend(LoggedEvent(chunk, at) for chunk in tail)
    record = run.record
    new_input = _input(redactor, record.input)
    counts: Counter[str] = redactor.counts
    if not counts:
        # Nothing matched: what was held back only moved text between deltas, so the run
        # is stored as it came (its seqs and chain those of the file).
        return run
    # The run's error repeats its RUN_ERROR's message, already counted there.
    error = record.error_message
    new_error = None if error is None else Redactor(rules).value(error)
    record = replace(record, input=new_input, error_message=new_error, last_seq=len(events))
    return LoadedRun(record, events, redactions=dict(counts))


def _input(redactor: Redactor, text: str | None) -> str | None:
    """The run's input (RunAgentInput JSON text), its strings redacted; as it came when
    nothing matched."""
    if text is None:
        return None
    value: Any = loads(text)
    redacted = redactor.value(value)
    return text if redacted == value else dumps(redacted)
