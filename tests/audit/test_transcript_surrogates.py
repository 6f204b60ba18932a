"""A lone UTF-16 surrogate in a tool name, a tool-call id or an error message.

JavaScript producers split emoji between deltas, so the log keeps such text
exactly. A transcript renders it (U+FFFD in Markdown and HTML, a JSON escape
in JSON) and never fails: over HTTP and from `agent-replay transcript`.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from asyncio.subprocess import PIPE

import httpx
import pytest

from agent_replay.transcript.render import FORMATS

RUN, THREAD = "lone-1", "lone-thread"
# Raw JSON text: the escapes stay lone surrogates once parsed.
EVENTS = [
    '{"type":"RUN_STARTED","threadId":"lone-thread","runId":"lone-1"}',
    '{"type":"TOOL_CALL_START","toolCallId":"call\\udc00id","toolCallName":"look\\ud800up"}',
    '{"type":"TOOL_CALL_ARGS","toolCallId":"call\\udc00id","delta":"{\\"q\\":\\"\\ud83d\\"}"}',
    '{"type":"TOOL_CALL_END","toolCallId":"call\\udc00id"}',
    '{"type":"TOOL_CALL_RESULT","toolCallId":"call\\udc00id","messageId":"r1",'
    '"content":"half \\ud83d"}',
    '{"type":"RUN_ERROR","message":"it broke \\udfff here","code":"E\\ud800"}',
]


@pytest.fixture
async def lone_run(client: httpx.AsyncClient) -> str:
    body = '{"events":[' + ",".join(EVENTS) + "]}"
    r = await client.post(
        f"/v1/runs/{RUN}/events", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code in (200, 409), r.text  # 409: stored by an earlier test already
    return RUN


def _rendered(fmt: str, text: str) -> None:
    """Each of the three texts shown: JSON may keep the surrogate (escaped); the error
    column a run keeps, and every text format, show U+FFFD."""
    if fmt == "json":
        shown = json.dumps(json.loads(text))
        marks: tuple[str, ...] = ("\\ufffd", "\\ud800", "\\udc00", "\\udfff")
    else:
        shown, marks = text, ("\ufffd",)
    for template in ("look{}up", "call{}id", "it broke {} here"):
        assert any(template.format(mark) in shown for mark in marks), (fmt, template)


@pytest.mark.parametrize("fmt", FORMATS)
async def test_transcript_over_http_of_lone_surrogates_in_names_ids_and_errors_renders(
    client: httpx.AsyncClient, lone_run: str, fmt: str
) -> None:
    for path in (f"/v1/runs/{lone_run}/transcript", f"/v1/threads/{THREAD}/transcript"):
        r = await client.get(path, params={"format": fmt})
        assert r.status_code == 200, (path, fmt, r.text[:300])
        _rendered(fmt, r.content.decode("utf-8"))


@pytest.mark.parametrize("fmt", FORMATS)
async def test_transcript_command_of_lone_surrogates_in_names_ids_and_errors_renders(
    lone_run: str, database_url: str, fmt: str
) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("REPLAY_")}
    command = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "agent_replay.cli", "transcript", "--run", lone_run,
        "--format", fmt, "--database-url", database_url,
        stdout=PIPE, stderr=PIPE, env=clean,
    )  # fmt: skip
    out, err = await asyncio.wait_for(command.communicate(), 120)
    assert command.returncode == 0, err.decode()[-2000:]
    _rendered(fmt, out.decode("utf-8"))
