"""`useChat({ resume: true })` (npm `ai` 5, 6 and 7, the stock `DefaultChatTransport`)
reopened at random points of a long run, on two service processes.

The test produces the run itself and stops between two appends at each chosen point
until the new tab has read its first chunk, so each tab's prefix is made at exactly that
seq; the points fall in every kind of part (reasoning, text, streamed tool input) and
anywhere else. Each tab must end with the messages of a chat that read the run
uninterrupted, read a stream the client accepts in which no part's content or end comes
before its start, and have been sent the run so far compactly: each part's content in
one delta, then exactly the chunks the uninterrupted chat read after that point.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import Replicas

DEADLINE = 120.0
DELTAS = {"text-delta": "id", "reasoning-delta": "id", "tool-input-delta": "toolCallId"}
STARTS = {"text-start": "id", "reasoning-start": "id", "tool-input-start": "toolCallId"}


def long_run(run: str, chat: str) -> list[list[dict[str, Any]]]:
    """A run of a few thousand events in sections: a point drawn in a section falls there."""
    words = [f"w{n} " for n in range(600)]
    pieces = ['{"query": "'] + [f"term{n} " for n in range(300)] + ['", "limit": 5}']
    first = [{"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": w} for w in words]
    reasoning = [
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": f"hm{n} "}
        for n in range(400)
    ]
    for n in range(0, len(first), 40):  # state changes among the text: one part, in place
        first.insert(n, {"type": "STATE_DELTA",
                         "delta": [{"op": "replace", "path": "/words", "value": n}]})  # fmt: skip
    hits = json.dumps({"hits": ["a", "b"]})
    return [
        [
            {"type": "STEP_STARTED", "stepName": "think"},
            {"type": "STATE_SNAPSHOT", "snapshot": {"words": 0}},
            {"type": "REASONING_MESSAGE_START", "messageId": "r1", "role": "reasoning"},
            *reasoning,
            {"type": "REASONING_MESSAGE_END", "messageId": "r1"},
        ],
        [
            {"type": "CUSTOM", "name": "progress", "value": {"stage": "answer"}},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
            *first,
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        ],
        [
            {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "search"},
            *({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": p} for p in pieces),
            {"type": "TOOL_CALL_END", "toolCallId": "c1"},
            {"type": "TOOL_CALL_RESULT", "messageId": "tr1", "toolCallId": "c1", "content": hits},
            {"type": "STEP_FINISHED", "stepName": "think"},
            {"type": "STEP_STARTED", "stepName": "answer"},
        ],
        [
            {"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"},
            *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m2", "delta": w} for w in words),
            {"type": "TEXT_MESSAGE_END", "messageId": "m2"},
            {"type": "STEP_FINISHED", "stepName": "answer"},
            {"type": "CUSTOM", "name": "progress", "value": {"stage": "done"}},
            {"type": "RUN_FINISHED", "threadId": chat, "runId": run},
        ],
    ]


def check_parts_start_first(chunks: list[dict[str, Any]]) -> None:
    """What the client would refuse: anything of a part before that part's start."""
    assert chunks[0]["type"] == "start", chunks[:1]
    assert chunks[-1]["type"] == "finish", chunks[-1:]
    started: set[tuple[str, str]] = set()
    for chunk in chunks:
        kind = chunk["type"]
        if kind in STARTS:
            key = (kind.removesuffix("-start"), chunk[STARTS[kind]])
            assert key not in started, f"{key} started twice"
            started.add(key)
        elif kind.startswith(("text-", "reasoning-")):
            assert (kind.split("-")[0], chunk["id"]) in started, chunk
        elif kind.startswith("tool-"):
            assert ("tool-input", chunk["toolCallId"]) in started, chunk


def split_at_live_edge(
    tab: list[dict[str, Any]], plain: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], int]:
    """The tab's chunks before the longest tail it shares with the uninterrupted chat's,
    and how many of the uninterrupted chat's chunks came before that tail."""
    shared = 0
    while shared < min(len(tab), len(plain)) and tab[-1 - shared] == plain[-1 - shared]:
        shared += 1
    return tab[: len(tab) - shared], len(plain) - shared


async def _line(proc: asyncio.subprocess.Process, expected: bytes, errors: Path) -> None:
    assert proc.stdout is not None
    async with asyncio.timeout(DEADLINE):
        line = await proc.stdout.readline()
    assert line == expected, line + await asyncio.to_thread(errors.read_bytes)


@pytest.mark.parametrize("package", ["ai5", "ai6", "ai"])
async def test_use_chat_resume_when_reopened_at_random_points_then_compact_and_same_messages(
    node_harness: Path, replicas: Replicas, package: str, tmp_path: Path
) -> None:
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    run, chat = f"compact-{package}-{seed}", f"chat-compact-{package}-{seed}"
    sections = long_run(run, chat)
    # One point inside each section (mid-reasoning, mid-text, mid-arguments, mid-text),
    # and two more anywhere: a tab opens after that many of the run's events.
    bounds, total = [], 1
    for section in sections:
        bounds.append((total + 1, total + len(section) - 1))
        total += len(section)
    points = sorted({rng.randint(lo, hi) for lo, hi in bounds} | {rng.randint(2, total - 1)
                                                                 for _ in range(2)})  # fmt: skip
    events = [{"type": "RUN_STARTED", "threadId": chat, "runId": run}]
    events += [event for section in sections for event in section]
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:

        async def append(batch: list[dict[str, Any]], close: bool = False) -> None:
            r = await http.post(f"/v1/runs/{run}/events", json={"events": batch, "close": close})
            assert r.status_code == 200, r.text

        await append(events[:1])
        errors = tmp_path / "node.err"
        with errors.open("wb") as stderr:
            proc = await asyncio.create_subprocess_exec(
                "node", "ai_sdk_resume_compact.mjs", package, replicas.a, replicas.b, chat,
                "demo", cwd=node_harness, stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE, stderr=stderr, limit=1 << 26,
            )  # fmt: skip
        assert proc.stdin is not None
        try:
            await _line(proc, b"ready\n", errors)
            sent = 1
            for point in points:
                while sent < point:  # in the batches a streaming producer sends
                    step = min(point - sent, 25)
                    await append(events[sent : sent + step])
                    sent += step
                proc.stdin.write(b"tab\n")
                await proc.stdin.drain()
                await _line(proc, b"opened\n", errors)  # its prefix was made at `point`
            await append(events[sent:], close=True)
            proc.stdin.write(b"end\n")
            await proc.stdin.drain()
            proc.stdin.close()
            try:
                async with asyncio.timeout(DEADLINE):
                    out, _ = await proc.communicate()
            except TimeoutError:
                raise AssertionError(errors.read_text()[-4000:]) from None
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
    assert proc.returncode == 0, errors.read_text()[-4000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    plain, tabs = result["plain"], result["tabs"]
    context = f"seed {seed}, points {points}"
    assert plain["status"] == "ready", (plain.get("error"), context)
    check_parts_start_first(plain["chunks"])
    answer = plain["messages"][-1]
    assert [p["type"] for p in answer["parts"]] == [
        "step-start", "data-state", "reasoning", "data-progress", "text", "tool-search",
        "step-start", "text", "data-progress",
    ], context  # fmt: skip
    assert answer["parts"][4]["text"] == "".join(f"w{n} " for n in range(600))
    assert answer["parts"][5]["state"] == "output-available"
    assert len(tabs) == len(points)
    for point, tab in zip(points, tabs, strict=True):
        where = f"{context}, tab at {point}"
        assert tab["status"] == "ready", (tab.get("error"), where)
        assert tab["messages"] == plain["messages"], where
        check_parts_start_first(tab["chunks"])
        prefix, replaced = split_at_live_edge(tab["chunks"], plain["chunks"])
        # The run so far, each part's content in one delta (none for a complete tool input).
        deltas = Counter((c["type"], c[DELTAS[c["type"]]]) for c in prefix if c["type"] in DELTAS)
        assert all(n == 1 for n in deltas.values()), (deltas, where)
        assert len(prefix) <= 20, ([c["type"] for c in prefix], where)
        # What it stands for: every chunk the uninterrupted chat read up to that point.
        assert replaced >= point - 20, (replaced, where)
