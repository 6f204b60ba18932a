"""One tool call whose arguments nest 400,000 levels inside their JSON string.

800 KB, under the chunk limit, and a JSON string inside the event, so ingest
cannot refuse it by the event's depth. Before the typewriter decoder bounded
its paths, `?view=decoded` (which the inspector always asks for) grew memory
with the square of the depth until the kernel killed the server. Every read the
inspector makes answers, correctly, in memory linear in the event.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from agent_replay.projector.jsvalues import MAX_DEPTH
from tests.stream.wire import SseReader
from tests.support.servers import serve_subprocess

LEVELS = 400_000
ARGUMENTS = '{"a":' + "[" * LEVELS + "]" * LEVELS + "}"
# Far below the square of the depth (which the kernel killed); above the reads' own working
# set (the event, its JSON and SSE copies, the projection's text).
MAX_GROWTH = 200 << 20


def _peak_rss(pid: int) -> int:
    """The process's peak resident memory so far, in bytes (VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc status")


def _events(run: str) -> list[dict[str, object]]:
    return [
        {"type": "RUN_STARTED", "threadId": f"{run}-t", "runId": run},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "deep"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": ARGUMENTS},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "still here"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "RUN_FINISHED", "threadId": f"{run}-t", "runId": run},
    ]


async def test_inspector_reads_of_a_400000_level_tool_argument_answer_in_bounded_memory(
    database_url: str,
) -> None:
    with serve_subprocess({"REPLAY_DATABASE_URL": database_url}) as (base, process):
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            assert (await http.get("/v1/runs", params={"limit": 1})).status_code == 200
            before = _peak_rss(process.pid)
            r = await http.post("/v1/runs/deep-args/events", json={"events": _events("deep-args"),
                                                                    "close": True})  # fmt: skip
            assert r.status_code == 200, r.text

            # The inspector's timeline: the decoded stream, from the first event.
            reader = SseReader()
            async with http.stream(
                "GET", "/v1/runs/deep-args/stream", params={"view": "decoded"}
            ) as response:
                assert response.status_code == 200
                async for data in response.aiter_bytes():
                    reader.feed(data)
            frames = [json.loads(text) for _, text in reader.events]
            assert [f["seq"] for f in frames] == list(range(1, 9))
            args = frames[2]
            assert args["chunk"]["delta"] == ARGUMENTS
            pieces = args["decoded"]["pieces"]
            # Decoded as far as MAX_DEPTH, then the rest exactly as sent, never lost.
            raw = "".join(p["text"] for p in pieces if p.get("raw"))
            assert pieces[-1].get("raw") and raw and ARGUMENTS.endswith(raw)
            assert len(ARGUMENTS) - len(raw) == len('{"a":') + MAX_DEPTH - 1
            assert "error" not in args["decoded"]

            # Its conversation (the inspector's snapshot at a seq, and at the end).
            for params in ({"at": "8"}, {"at": "3"}, {}):
                messages = await http.get("/v1/runs/deep-args/messages", params=params)
                assert messages.status_code == 200, messages.text[:300]
                parts = messages.json()["messages"][0]["parts"]
                call = next(p for p in parts if p.get("type") == "tool-call")
                assert call["arguments"] == ARGUMENTS and "input" not in call
            events = await http.get("/v1/runs/deep-args/events", params={"after": 2, "limit": 1})
            assert events.json()["events"][0]["chunk"]["delta"] == ARGUMENTS
            for kind in ("markdown", "html", "json"):
                transcript = await http.get(
                    "/v1/runs/deep-args/transcript", params={"format": kind}
                )
                assert transcript.status_code == 200, (kind, transcript.text[:300])
                assert "still here" in transcript.text

            growth = _peak_rss(process.pid) - before
            assert growth < MAX_GROWTH, f"the server grew {growth >> 20} MiB"
