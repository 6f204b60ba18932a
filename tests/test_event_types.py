"""The catalog of AG-UI event types against its readers: each acts on exactly the types the
catalog gives it, so a type added to the catalog without its handlers fails here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_replay.console.render import WRITERS, Pretty
from agent_replay.event_types import BY_NAME, CATALOG, EventType, Reader, read_by
from agent_replay.log.chunks import stored
from agent_replay.log.summary import Summary, summarize
from agent_replay.projector import agui, ai_sdk, handlers


def _event(kind: EventType) -> dict[str, Any]:
    """An event of `kind` with every field the spec defines for it set to a string."""
    return {"type": kind.name, **{f: f"{f}-1" for f in kind.fields}}


@pytest.mark.parametrize(
    ("reader", "dispatch"),
    [
        pytest.param(Reader.PROJECTOR, handlers.HANDLERS, id="projector"),
        pytest.param(Reader.AGUI, agui.APPLY, id="agui"),
        pytest.param(Reader.AI_SDK, ai_sdk.HANDLERS, id="ai_sdk"),
        pytest.param(Reader.TAIL, WRITERS, id="tail"),
    ],
)
def test_reader_when_compared_with_the_catalog_then_dispatches_exactly_its_types(
    reader: Reader, dispatch: dict[str, Any]
) -> None:
    expected = read_by(reader)
    assert {"without a handler": expected - set(dispatch),
            "not in the catalog for it": set(dispatch) - expected} == {
        "without a handler": set(), "not in the catalog for it": set()}  # fmt: skip


@pytest.mark.parametrize("kind", CATALOG, ids=lambda kind: kind.name)
def test_summary_when_given_one_event_of_each_type_then_only_its_types_add_to_it(
    kind: EventType,
) -> None:
    summary = summarize([stored(_event(kind), 0)])
    assert (summary != Summary()) == (Reader.SUMMARY in kind.readers)


@pytest.mark.parametrize("kind", CATALOG, ids=lambda kind: kind.name)
def test_tail_when_given_one_event_of_each_type_then_only_its_types_are_written(
    kind: EventType,
) -> None:
    written: list[str] = []

    class Collect:
        def write(self, text: str, style: str | None = None) -> None:
            written.append(text)

    pretty = Pretty(Collect())
    pretty.chunk({"type": "TEXT_MESSAGE_CONTENT", "delta": "mid-line"}, None)
    written.clear()
    event = {**_event(kind), "delta": "thinking"}  # STEP_FINISHED: the legacy thinking text
    decoded = {"toolCallId": "toolCallId-1", "pieces": [{"path": "/q", "text": "x"}]}
    pretty.chunk(event, decoded)
    assert bool(written) == (Reader.TAIL in kind.readers)


@pytest.mark.parametrize(
    "kind", [kind for kind in CATALOG if kind.required], ids=lambda kind: kind.name
)
def test_agui_relay_when_a_required_field_is_missing_then_the_event_is_held_back(
    kind: EventType,
) -> None:
    relay = agui.AguiRelay(started=True)
    event = _event(kind)
    assert relay.feed(event) == [event]
    for field in kind.required:
        assert relay.feed({k: v for k, v in event.items() if k != field}) == [], field


def test_catalog_when_compared_with_ag_ui_core_then_names_the_same_types(
    node_harness: Path,
) -> None:
    done = subprocess.run(
        ["node", "--input-type=module", "-e",
         "import { EventType } from '@ag-ui/core';"
         "console.log(JSON.stringify(Object.values(EventType)))"],
        cwd=node_harness, capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert sorted(json.loads(done.stdout)) == sorted(BY_NAME)
