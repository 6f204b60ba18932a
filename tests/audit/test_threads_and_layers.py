"""Thread assembly over plain data, and the audit packages' place in the import layers."""

from __future__ import annotations

import pytest

from agent_replay.audit.threads import ThreadRun, assemble_thread, user_turns
from agent_replay.log.chunks import dumps
from tests.stream.test_layering import _modules, _offending


def _input(*messages: dict[str, object]) -> str:
    return dumps({"threadId": "t", "runId": "r", "messages": list(messages)})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, []),
        ("not json", []),
        (dumps({"messages": "nope"}), []),
        (_input({"id": "a", "role": "user", "content": "hi"},
                {"id": "b", "role": "assistant", "content": "yo"}), []),
        (_input({"id": "a", "role": "user", "content": "old"},
                {"id": "b", "role": "tool", "content": "x", "toolCallId": "c"},
                {"role": "user", "content": [{"type": "text", "text": "new"},
                                             {"type": "image", "source": {}}],
                 "createdAt": "2026-11-30T10:00:00Z"}),
         [{"id": "r-user-2", "role": "user", "parts": [{"type": "text", "content": "new"}],
           "createdAt": "2026-11-30T10:00:00.000Z"}]),
        (_input({"id": "u", "role": "user", "content": ""}),
         [{"id": "u", "role": "user", "parts": []}]),
    ],
    ids=["no-input", "not-json", "no-list", "ends-with-assistant", "after-tool", "empty-text"],
)  # fmt: skip
def test_user_turns_when_input_shaped_so_then_trailing_user_messages(
    text: str | None, expected: list[dict[str, object]]
) -> None:
    assert user_turns("r", text) == expected


def test_assemble_thread_when_projection_holds_the_user_turn_then_not_repeated() -> None:
    snapshot_user = {"id": "u1", "role": "user", "parts": [{"type": "text", "content": "q"}]}
    answer = {"id": "a1", "role": "assistant", "parts": []}
    runs = [
        ThreadRun(
            "r1", _input({"id": "u1", "role": "user", "content": "q"}), [snapshot_user, answer]
        ),
        ThreadRun("r2", _input({"id": "u2", "role": "user", "content": "next"}), []),
    ]
    assert [m["id"] for m in assemble_thread(runs)] == ["u1", "a1", "u2"]


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("log", ("agent_replay.audit", "agent_replay.archive", "agent_replay.transcript")),
        (
            "audit",
            (
                "agent_replay.api",
                "agent_replay.stream",
                "agent_replay.archive",
                "agent_replay.transcript",
            ),
        ),
        ("archive", ("agent_replay.api", "agent_replay.stream", "agent_replay.transcript")),
        ("transcript", ("agent_replay.api", "agent_replay.stream")),
    ],
)
def test_layers_when_audit_packages_import_to_their_right_then_fails(
    package: str, forbidden: tuple[str, ...]
) -> None:
    assert _offending(_modules(package), forbidden) == []
