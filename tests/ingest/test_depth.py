"""Events nested deeper than MAX_EVENT_DEPTH are refused on every append path.

422 `invalid_event` naming the depth, and nothing of the request stored; an
event exactly at the bound is stored, whichever path reads it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_replay.errors import NestedTooDeep
from agent_replay.log import EventLog
from agent_replay.log.chunks import MAX_EVENT_DEPTH, nesting
from agent_replay.log.rows import BATCH_MIN


def deep_event(levels: int) -> dict[str, Any]:
    """An event nesting `levels` objects and arrays, itself included."""
    value: Any = []
    for _ in range(levels - 2):
        value = [value]
    return {"type": "CUSTOM", "name": "deep", "value": value}


def deep_text(levels: int) -> str:
    """The same event's JSON text, built without a recursive encoder."""
    inner = "[" * (levels - 1) + "]" * (levels - 1)
    return '{"type":"CUSTOM","name":"deep","value":' + inner + "}"


PLAIN = {"type": "CUSTOM", "name": "plain", "value": 1}


def _refused(r: httpx.Response, *depths: int) -> None:
    """422 invalid_event naming the bound and one of `depths` (the event's; past what the
    parsers go, the body's, which counts an envelope's two levels too)."""
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "invalid_event", error
    message = error["message"]
    assert f"at most {MAX_EVENT_DEPTH}" in message, error
    assert any(f"nested {depth} levels" in message for depth in depths), error


async def _nothing_stored(client: httpx.AsyncClient, run: str) -> None:
    r = await client.get(f"/v1/runs/{run}")
    assert r.status_code == 404 or r.json()["last_seq"] == 0, r.text


def test_nesting_counts_levels_and_ignores_brackets_inside_strings() -> None:
    assert nesting(deep_text(5)) == 5
    assert nesting('{"a":"[[[[{{{{\\"[[","b":[{}]}') == 3
    assert nesting("1") == 0


@given(st.recursive(st.none() | st.integers() | st.text(alphabet='[]{}"\\ab'),
                    lambda inner: st.lists(inner) | st.dictionaries(st.text('[]{}"\\'), inner),
                    max_leaves=30))  # fmt: skip
def test_nesting_equals_the_depth_of_the_parsed_value(value: Any) -> None:
    def depth(v: Any) -> int:
        if isinstance(v, list):
            return 1 + max(map(depth, v), default=0)
        if isinstance(v, dict):
            return 1 + max(map(depth, v.values()), default=0)
        return 0

    assert nesting(json.dumps(value)) == depth(value)


@pytest.mark.parametrize("levels", [MAX_EVENT_DEPTH + 1, 1000, 5000])
@pytest.mark.parametrize("count", [1, BATCH_MIN + 20])
async def test_json_append_of_an_event_nested_past_the_bound_is_refused_and_nothing_stored(
    client: httpx.AsyncClient, levels: int, count: int
) -> None:
    run = f"deep-json-{levels}-{count}"
    events = [json.dumps(PLAIN)] * (count - 1) + [deep_text(levels)]
    body = '{"events":[' + ",".join(events) + "]}"
    r = await client.post(
        f"/v1/runs/{run}/events", content=body, headers={"Content-Type": "application/json"}
    )
    _refused(r, levels, levels + 2)
    await _nothing_stored(client, run)


@pytest.mark.parametrize("count", [1, BATCH_MIN + 20])
async def test_append_of_an_event_nested_exactly_at_the_bound_is_stored(
    client: httpx.AsyncClient, count: int
) -> None:
    run = f"deep-ok-{count}"
    text = deep_text(MAX_EVENT_DEPTH)
    body = '{"events":[' + ",".join([json.dumps(PLAIN)] * (count - 1) + [text]) + "]}"
    r = await client.post(
        f"/v1/runs/{run}/events", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    events = (await client.get(f"/v1/runs/{run}/events")).json()["events"]
    assert len(events) == count and nesting(json.dumps(events[-1]["chunk"])) == MAX_EVENT_DEPTH


@pytest.mark.parametrize("levels", [MAX_EVENT_DEPTH + 1, 1000])
@pytest.mark.parametrize("count", [1, BATCH_MIN + 20])
async def test_ndjson_append_of_an_event_nested_past_the_bound_is_refused_and_nothing_stored(
    client: httpx.AsyncClient, levels: int, count: int
) -> None:
    run = f"deep-nd-{levels}-{count}"
    body = "\n".join([json.dumps(PLAIN)] * (count - 1) + [deep_text(levels)]) + "\n"
    r = await client.post(
        f"/v1/runs/{run}/events", content=body, headers={"Content-Type": "application/x-ndjson"}
    )
    _refused(r, levels)
    await _nothing_stored(client, run)


@pytest.mark.parametrize("levels", [MAX_EVENT_DEPTH + 1, 300, 1000])
async def test_in_process_append_of_an_event_nested_past_the_bound_is_refused(
    event_log: EventLog, levels: int
) -> None:
    run = f"deep-log-{levels}"
    for chunks in ([deep_event(levels)], [PLAIN, deep_event(levels)]):
        with pytest.raises(NestedTooDeep) as refused:
            await event_log.append(run, chunks)
        assert refused.value.code == "invalid_event"
    assert await event_log.read_events(run, 0, 10) == []


async def test_durable_stream_json_append_of_an_event_nested_past_the_bound_is_refused(
    client: httpx.AsyncClient,
) -> None:
    json_type = {"Content-Type": "application/json"}
    created = await client.put("/v1/stream/deep-stream", headers=json_type)
    assert created.status_code == 201, created.text
    r = await client.post(
        "/v1/stream/deep-stream", headers=json_type, content="[" + deep_text(1000) + "]"
    )
    _refused(r, 1000, 1001)
    read = await client.get("/v1/stream/deep-stream", params={"offset": "-1"})
    assert read.json() == []


def test_import_of_an_event_nested_past_the_bound_is_refused(
    tmp_path: Path, database_url: str
) -> None:
    header = {
        "format": "agent-replay.export", "version": 1,
        "runs": [{"run_id": "deep-import", "status": "running", "last_seq": 1,
                  "created_at": "2026-01-01T00:00:00+00:00", "metadata": {}}],
    }  # fmt: skip
    event = (
        '{"run_id":"deep-import","seq":1,"received_at":"2026-01-01T00:00:00+00:00","chunk":'
        + deep_text(MAX_EVENT_DEPTH + 1)
        + "}"
    )
    file = tmp_path / "deep.jsonl"
    file.write_text(json.dumps(header) + "\n" + event + "\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "agent_replay.cli",
            "import",
            str(file),
            "--database-url",
            database_url,
        ],
        capture_output=True,
        env=clean,
        timeout=120,
    )
    assert done.returncode != 0
    assert f"nested {MAX_EVENT_DEPTH + 1} levels deep" in done.stderr.decode(), done.stderr
