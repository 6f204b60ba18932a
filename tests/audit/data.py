"""Logs for the audit tests: a run with every part type, a failing run, user inputs."""

from __future__ import annotations

from typing import Any

Chunk = dict[str, Any]


def run_input(run_id: str, thread_id: str, *user_texts: str, history: int = 0) -> Chunk:
    """A RunAgentInput: `history` earlier turns, then this run's user message(s)."""
    messages: list[Chunk] = []
    for i in range(history):
        messages.append({"id": f"{run_id}-h{i}-u", "role": "user", "content": f"earlier {i}"})
        messages.append({"id": f"{run_id}-h{i}-a", "role": "assistant", "content": "ok"})
    for i, text in enumerate(user_texts):
        # Alternate the two content shapes AG-UI allows.
        content: Any = text if i % 2 == 0 else [{"type": "text", "text": text}, {"type": "binary"}]
        messages.append({"id": f"{run_id}-u{i}", "role": "user", "content": content})
    return {"threadId": thread_id, "runId": run_id, "messages": messages, "tools": []}


def every_part(run_id: str, thread_id: str) -> list[Chunk]:
    """Text, reasoning, tool calls (result, error result, approval), a UI
    resource, a structured output, media from a snapshot, usage; plus text
    that must be escaped and a lone surrogate, a big integer, U+2028."""
    m1, m2 = f"{run_id}-m1", f"{run_id}-m2"
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {
            "type": "MESSAGES_SNAPSHOT",
            "messages": [
                {
                    "id": f"{run_id}-photo",
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "What is in this photo?"},
                        {
                            "type": "image",
                            "source": {"type": "url", "value": "https://example.invalid/c.png"},
                        },
                    ],
                }
            ],
        },
        {"type": "TEXT_MESSAGE_START", "messageId": m1, "role": "assistant"},
        {"type": "STEP_STARTED", "stepName": "plan"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": m1, "delta": "SECRET-REASONING "},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": m1, "delta": "think <b>hard</b>"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m1, "delta": "Weather & <script>x</script> "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m1, "delta": "\ud83d"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m1, "delta": "\ude80 line\u2028sep"},
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "get_weather",
         "parentMessageId": m1},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"city":"Paris",'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '"units":"metric"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c1", "messageId": "r1",
         "content": '{"temp":21,"sky":"clear","big":123456789012345678901234567890}'},
        {"type": "CUSTOM", "name": "ui-resource",
         "value": {"toolCallId": "c1", "toolName": "get_weather",
                   "resource": {"uri": "ui://weather/card", "mimeType": "text/html",
                                "text": "<div>21</div>"}}},
        {"type": "TOOL_CALL_START", "toolCallId": "c2", "toolCallName": "delete_file",
         "parentMessageId": m1},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c2", "delta": '{"path":"q3.pdf"}'},
        {"type": "CUSTOM", "name": "approval-requested",
         "value": {"toolCallId": "c2", "approval": {"id": "appr-1"}}},
        {"type": "TOOL_CALL_END", "toolCallId": "c2"},
        {"type": "TOOL_CALL_START", "toolCallId": "c3", "toolCallName": "flaky",
         "parentMessageId": m1},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c3", "delta": "{}"},
        {"type": "TOOL_CALL_END", "toolCallId": "c3"},
        {"type": "TOOL_CALL_RESULT", "toolCallId": "c3", "content": '{"error":"timed out"}',
         "state": "output-error"},
        {"type": "TEXT_MESSAGE_END", "messageId": m1},
        {"type": "TEXT_MESSAGE_START", "messageId": m2, "role": "assistant"},
        {"type": "CUSTOM", "name": "structured-output.start", "value": {"messageId": m2}},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m2, "delta": '{"verdict":"sun'},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m2, "delta": 'ny","score":0.9}'},
        {"type": "TEXT_MESSAGE_END", "messageId": m2},
        {"type": "CUSTOM", "name": "structured-output.complete",
         "value": {"messageId": m2, "object": {"verdict": "sunny", "score": 0.9}}},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "finishReason": "stop",
         "usage": {"promptTokens": 11, "completionTokens": 22, "totalTokens": 33}},
    ]  # fmt: skip


def failing(run_id: str, thread_id: str) -> list[Chunk]:
    m = f"{run_id}-m1"
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": "Trying the <upstream>"},
        {"type": "RUN_ERROR", "message": "upstream exploded <b>&</b>", "code": "upstream_<error>"},
    ]


def simple(run_id: str, thread_id: str, answer: str) -> list[Chunk]:
    m = f"{run_id}-m1"
    return [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": m, "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": m, "delta": answer},
        {"type": "TEXT_MESSAGE_END", "messageId": m},
        {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id, "finishReason": "stop"},
    ]
