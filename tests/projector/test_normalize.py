"""Normalize mode against TanStack's own `normalizeStreamChunk` (npm @tanstack/ai 0.58.0, run
by Node): every legacy form it rewrites, and random chunks, give the same chunks here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.projector import project
from agent_replay.projector.normalize import normalize_chunk
from tests.projector.strategies import TYPES

# One case per legacy form the reference rewrites (and a spec chunk it leaves alone).
LEGACY: list[dict[str, Any]] = [
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolName": "search", "model": "m"},
    {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "a", "toolName": "b"},
    {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "x",
     "metadata": {"thoughtSignature": "sig-tc"}, "timestamp": 5},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "result": {"ok": True}, "toolName": "search"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "result": [1, 2], "parentMessageId": "m1"},
    {"type": "TOOL_CALL_END", "toolCallId": "c1", "result": "bad", "state": "output-error",
     "input": {"q": 1}},
    {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{", "args": "{", "model": "m"},
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "hi", "content": "hi hi",
     "model": "gpt", "id": "legacy-id"},
    {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant", "model": "gpt"},
    {"type": "RUN_ERROR", "error": {"message": "boom", "code": "E1"}, "runId": "r",
     "threadId": "t"},
    {"type": "RUN_ERROR", "message": "kept", "error": {"message": "lost", "code": None}},
    {"type": "RUN_ERROR", "error": "a string", "model": "m"},
    {"type": "RUN_FINISHED", "runId": "r", "threadId": "t", "finishReason": "stop", "model": "gpt",
     "usage": {"promptTokens": 10, "completionTokens": 5, "totalTokens": 15,
               "promptTokensDetails": {"cachedTokens": 3, "audioTokens": 1},
               "completionTokensDetails": {"reasoningTokens": 2}, "cost": 0.5}},
    {"type": "RUN_FINISHED", "runId": "r", "usage": {"promptTokens": 1, "completionTokens": 1,
                                                     "totalTokens": 2}},
    {"type": "RUN_FINISHED", "runId": "r", "usage": [{"inputTokens": 1}]},
    {"type": "RUN_FINISHED", "runId": "r", "tanstack:interruptErrors": [{"id": "i"}]},
    # Legacy thinking as steps: the delta, content and signature of a step.
    {"type": "STEP_STARTED", "stepName": "thinking", "stepId": "s1"},
    {"type": "STEP_FINISHED", "stepName": "thinking", "stepId": "s1", "delta": "hm",
     "content": "hm", "signature": "sig-step", "timestamp": 7},
    {"type": "STEP_FINISHED", "stepName": "plan", "signature": "sig-name"},
    {"type": "REASONING_MESSAGE_CONTENT", "messageId": "r1", "delta": "x", "signature": "sig-r"},
    {"type": "REASONING_MESSAGE_END", "messageId": "r1", "signature": ""},
    {"type": "TOOL_CALL_END", "toolCallId": "c9", "signature": "sig-call"},
    {"type": "CUSTOM", "name": "progress", "value": {"n": 1}, "runId": "r", "threadId": "t",
     "extra": True},
    {"type": "MESSAGES_SNAPSHOT", "messages": [], "metadata": {"tanstack": {"keep": 1}, "o": 2},
     "model": "m"},
    {"type": "STATE_SNAPSHOT", "snapshot": {}, "metadata": "text", "x": 1},
    {"type": "SOMETHING_NEW", "a": 1},
    {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
]  # fmt: skip


def _reference(chunks: list[dict[str, Any]], node: Path) -> list[list[dict[str, Any]]]:
    lines = "".join(json.dumps(c) + "\n" for c in chunks)
    done = subprocess.run(
        ["node", "normalize.mjs"], input=lines.encode(), cwd=node, capture_output=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def _ours(chunk: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(json.dumps(list(normalize_chunk(chunk))))
    return out


def test_normalize_when_each_legacy_form_then_same_chunks_as_tanstack(node_harness: Path) -> None:
    reference = _reference(LEGACY, node_harness)
    assert [_ours(c) for c in LEGACY] == reference


def test_normalize_when_projected_then_same_as_projecting_the_reference_normalized_log(
    node_harness: Path,
) -> None:
    log = [
        {"type": "RUN_STARTED", "runId": "r", "threadId": "t"},
        {"type": "STEP_STARTED", "stepName": "thinking", "stepId": "s1"},
        {"type": "STEP_FINISHED", "stepName": "thinking", "stepId": "s1", "delta": "hm",
         "content": "hm", "signature": "sig"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "a", "content": "a"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolName": "search",
         "parentMessageId": "m1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"q": 1}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1", "result": {"hits": 2}},
        {"type": "RUN_ERROR", "error": {"message": "boom", "code": "E"}},
    ]  # fmt: skip
    flattened = [c for cs in _reference(log, node_harness) for c in cs]
    assert project(log, normalize=True) == project(flattened)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
KEYS = [
    "toolName", "toolCallName", "toolCallId", "result", "error", "model", "content", "args",
    "delta", "signature", "stepId", "stepName", "messageId", "metadata", "usage", "runId",
    "threadId", "finishReason", "state", "parentMessageId", "timestamp", "input", "x",
]  # fmt: skip
chunks = st.builds(
    lambda kind, extra: {"type": kind, **extra},
    st.sampled_from([*TYPES, "THINKING_START", "RAW", "REASONING_ENCRYPTED_VALUE"]),
    st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6),
)


@settings(
    max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=st.lists(chunks, min_size=150, max_size=150))
def test_normalize_when_random_chunks_then_same_chunks_as_tanstack(
    batch: list[dict[str, Any]], node_harness: Path
) -> None:
    # One Node run for a batch of random chunks: hypothesis draws the batch.
    assert [_ours(c) for c in batch] == _reference(batch, node_harness)
