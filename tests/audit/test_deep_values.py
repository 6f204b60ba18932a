"""Deeply nested values: refused at ingest past the bound, and never a 500 when read.

Tool arguments and results are strings parsed later, so a value nested far
deeper than ingest allows still reaches the projector, the transcripts and the
hydration routes; each must answer, keeping the deep value as raw text.
"""

from __future__ import annotations

import json

import httpx

from agent_replay.audit.projection import messages_json, project_run
from agent_replay.log import EventLog
from agent_replay.log.chunks import MAX_EVENT_DEPTH, nesting
from agent_replay.projector.jsvalues import MAX_DEPTH

DEEP = 350


def _nested(depth: int) -> str:
    return '{"a":' + "[" * depth + "]" * depth + "}"


def _run_with_deep_tool(run: str, thread: str, depth: int) -> list[dict[str, object]]:
    deep = _nested(depth)
    call = f"{run}-call"
    return [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TOOL_CALL_START", "toolCallId": call, "toolCallName": "deep"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": deep[:100]},
        {"type": "TOOL_CALL_ARGS", "toolCallId": call, "delta": deep[100:]},
        {"type": "TOOL_CALL_END", "toolCallId": call},
        {"type": "TOOL_CALL_RESULT", "toolCallId": call, "messageId": f"{run}-r", "content": deep},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-t", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-t", "delta": "after the tool"},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-t"},
        {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
    ]


async def test_reads_of_a_thread_with_a_350_level_tool_argument_and_result_answer_200(
    client: httpx.AsyncClient, event_log: EventLog
) -> None:
    run, thread = "deep-1", "deep-thread-1"
    await event_log.create_run(run, thread_id=thread, agent="demo")
    r = await client.post(
        f"/v1/runs/{run}/events",
        json={"events": _run_with_deep_tool(run, thread, DEEP), "close": True},
    )
    assert r.status_code == 200, r.text
    deep = _nested(DEEP)
    for path, params in [
        (f"/v1/runs/{run}/messages", {}),
        (f"/v1/threads/{thread}/messages", {}),
        ("/v1/chat/demo", {"threadId": thread}),
        (f"/v1/ai-sdk/demo/{thread}/messages", {}),
        (f"/v1/runs/{run}/transcript", {"format": "json"}),
        (f"/v1/runs/{run}/transcript", {"format": "markdown"}),
        (f"/v1/runs/{run}/transcript", {"format": "html"}),
        (f"/v1/threads/{thread}/transcript", {"format": "json"}),
        (f"/v1/runs/{run}/export", {}),
    ]:
        answer = await client.get(path, params=params)
        assert answer.status_code == 200, (path, params, answer.text[:300])
        body = answer.text
        assert "after the tool" in body, (path, params)
        # The deep value is kept: as raw text, or escaped inside a JSON string.
        assert deep in body or json.dumps(deep) in body or "[" * DEEP in body, (path, params)


READS = [
    ("/v1/runs/{run}/messages", {}),
    ("/v1/threads/{thread}/messages", {}),
    ("/v1/chat/demo", {"threadId": "{thread}"}),
    ("/v1/ai-sdk/demo/{thread}/messages", {}),
    ("/v1/runs/{run}/transcript", {"format": "json"}),
    ("/v1/runs/{run}/transcript", {"format": "markdown"}),
    ("/v1/runs/{run}/transcript", {"format": "html"}),
]


async def test_reads_of_a_run_whose_event_nests_exactly_at_the_bound_answer_200(
    client: httpx.AsyncClient, event_log: EventLog
) -> None:
    """A tool result given as a deep list in a MESSAGES_SNAPSHOT: the event nests
    MAX_EVENT_DEPTH levels, ingest takes it, and every read renders it."""
    run, thread = "deep-2", "deep-thread-2"
    await event_log.create_run(run, thread_id=thread, agent="demo")
    wrapper = (
        '{"type":"MESSAGES_SNAPSHOT",'
        '"messages":[{"id":"m2","role":"tool","toolCallId":"c2","content":'
    )
    inner = MAX_EVENT_DEPTH - 3  # the event, its messages list and the message are 3
    text = wrapper + "[" * inner + "]" * inner + "}]}"
    assert nesting(text) == MAX_EVENT_DEPTH
    events = [
        json.dumps({"type": "RUN_STARTED", "threadId": thread, "runId": run}),
        text,
        json.dumps({"type": "TEXT_MESSAGE_START", "messageId": "t2", "role": "assistant"}),
        json.dumps({"type": "TEXT_MESSAGE_CONTENT", "messageId": "t2", "delta": "after the tool"}),
        json.dumps({"type": "TEXT_MESSAGE_END", "messageId": "t2"}),
        json.dumps({"type": "RUN_FINISHED", "threadId": thread, "runId": run}),
    ]
    body = '{"close":true,"events":[' + ",".join(events) + "]}"
    r = await client.post(
        f"/v1/runs/{run}/events", content=body, headers={"Content-Type": "application/json"}
    )
    assert r.status_code == 200, r.text
    for path, params in READS:
        url = path.format(run=run, thread=thread)
        query = {k: v.format(thread=thread) for k, v in params.items()}
        answer = await client.get(url, params=query)
        assert answer.status_code == 200, (url, query, answer.text[:300])
        assert "after the tool" in answer.text, (url, query)


def test_a_chunk_stored_deeper_than_the_bound_projects_with_the_deep_value_as_text() -> None:
    """Data stored before ingest bounded depth: the deep part is kept as its JSON text."""
    deep = "[" * 800 + "]" * 800
    texts = [
        json.dumps({"type": "RUN_STARTED", "threadId": "t", "runId": "old"}),
        '{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"tool","toolCallId":"c",'
        '"content":' + deep + "}]}",
        json.dumps({"type": "RUN_FINISHED", "threadId": "t", "runId": "old"}),
    ]
    messages = project_run("old", texts)
    rendered = messages_json(messages)
    assert "[" * 600 in rendered
    assert nesting(rendered) <= MAX_DEPTH + 10


async def test_ai_sdk_stream_of_a_run_with_a_350_level_tool_argument_keeps_it_as_text(
    client: httpx.AsyncClient, event_log: EventLog
) -> None:
    """The AI SDK's UI message stream of an open run: the deep arguments stay text."""
    run, thread = "deep-3", "deep-thread-3"
    await event_log.create_run(run, thread_id=thread, agent="demo")
    events = _run_with_deep_tool(run, thread, DEEP)[:-1]  # open: the chat's active run
    r = await client.post(f"/v1/runs/{run}/events", json={"events": events})
    assert r.status_code == 200, r.text
    received = ""
    async with client.stream("GET", f"/v1/ai-sdk/demo/{thread}/stream") as answer:
        assert answer.status_code == 200, await answer.aread()
        async for text in answer.aiter_text():
            received += text
            if "after the tool" in received:
                break
    frames = [
        json.loads(line[len("data: ") :])
        for line in received.splitlines()
        if line.startswith("data: {")
    ]
    deep = _nested(DEEP)
    by_type = {frame["type"]: frame for frame in frames}
    # Kept as the text it was sent as (an input the AI SDK could not take as a value).
    refused = by_type["tool-input-error"]
    assert refused["input"] == deep and str(MAX_DEPTH) in refused["errorText"], refused
