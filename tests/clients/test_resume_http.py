"""The resume paths over plain HTTP: the AI SDK stream's compact prefix, `?resume=replay`,
`?resume=continue` after `Last-Event-ID`, `?compact=snapshot` on the plain stream, and their
rejections."""

from __future__ import annotations

import json
from typing import Any

import httpx

from agent_replay.projector.agui import AguiProjection
from agent_replay.projector.ai_sdk_messages import build_message
from tests.clients.conftest import Replicas
from tests.clients.test_encoders import V5_TYPES, check_agui_sequence, check_ui_stream

USER = {"id": "u1", "role": "user", "content": "Is it cold?"}
QUESTION = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Is it cold?"}]}


def frames(text: str) -> list[tuple[int | None, str]]:
    """(id, data) per SSE event; comments (heartbeats) and the retry hint left out."""
    out = []
    for block in text.split("\n\n"):
        ident, data = None, None
        for line in block.split("\n"):
            if line.startswith("id: "):
                ident = int(line[4:])
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((ident, data))
    return out


async def _read_some(http: httpx.AsyncClient, url: str, body: dict[str, Any], count: int) -> str:
    text = ""
    async with http.stream("POST", url, json=body) as response:
        async for piece in response.aiter_text():
            text += piece
            if len([f for f in frames(text) if f[0] is not None]) >= count:
                break
    return text


async def test_ai_sdk_stream_when_resume_continue_after_last_event_id_then_only_the_rest(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        body = {"id": "chat-continue", "messages": [QUESTION], "trigger": "submit-message"}
        first = frames(await _read_some(http, "/v1/ai-sdk/demo", body, 8))
        # Everything up to the last frame that carried an id: what a client would resume after.
        end = max(i for i, (ident, _) in enumerate(first) if ident is not None)
        last_id = first[end][0]
        seen = [json.loads(data) for _, data in first[: end + 1]]
        rest = await http.get(
            f"{replicas.b}/v1/ai-sdk/demo/chat-continue/stream?resume=continue",
            headers={"Last-Event-ID": str(last_id)},
        )
        assert rest.status_code == 200, rest.text
        after = [json.loads(d) for _, d in frames(rest.text)[:-1]]
        assert frames(rest.text)[-1][1] == "[DONE]"
        assert after[0]["type"] != "start"
        check_ui_stream(seen + after, V5_TYPES)  # no gap, no duplicate part
        run_id = seen[0]["messageId"]
        whole = await http.get(f"/v1/runs/{run_id}")
        assert whole.json()["closed"]
        replay = await http.get(
            "/v1/ai-sdk/demo/chat-continue/stream", headers={"Last-Event-ID": "1"}
        )
        assert replay.status_code == 204  # closed now: nothing active
        messages = (await http.get("/v1/ai-sdk/demo/chat-continue/messages")).json()
    assert build_message(run_id, seen + after) == messages[1]


async def test_ai_sdk_stream_when_bad_resume_or_offset_then_4xx_error(replicas: Replicas) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        body = {"id": "chat-bad", "messages": [QUESTION], "trigger": "submit-message"}
        await _read_some(http, "/v1/ai-sdk/demo", body, 2)
        bad = await http.get("/v1/ai-sdk/demo/chat-bad/stream?resume=sideways")
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
        offset = await http.get(
            "/v1/ai-sdk/demo/chat-bad/stream?resume=continue", headers={"Last-Event-ID": "x"}
        )
        assert offset.status_code == 400 and offset.json()["error"]["code"] == "invalid_offset"
        missing = await http.post("/v1/ai-sdk/demo", json={"messages": []})
        assert missing.status_code == 422 and missing.json()["error"]["code"] == "invalid_request"


async def test_plain_stream_when_compact_snapshot_mid_run_then_valid_agui_with_same_messages(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        started = await http.post(
            "/v1/agents/demo/runs",
            json={"messages": [USER]},
        )
        run_id = started.json()["run_id"]
        # Wait until the run is well under way (a condition, not a sleep).
        async with http.stream("GET", f"/v1/runs/{run_id}/stream") as response:
            seen = ""
            async for piece in response.aiter_text():
                seen += piece
                if "TOOL_CALL_ARGS" in seen:
                    break
        joined = await http.get(f"{replicas.b}/v1/runs/{run_id}/stream?compact=snapshot&offset=now")
        assert joined.status_code == 200
        events = [json.loads(d) for _, d in frames(joined.text)]
        check_agui_sequence(events)
        types = [e["type"] for e in events]
        assert types[:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
        # The first text message stays open until after the tool result: it starts afresh.
        assert "TEXT_MESSAGE_START" in types[2:6], types[:6]
        stored = (await http.get(f"/v1/runs/{run_id}/events?limit=1000")).json()["events"]
        whole = AguiProjection.for_input({"messages": [USER]})
        for event in stored:
            whole.apply(event["chunk"])
        client = AguiProjection()
        for event in events:
            client.apply(event)
        assert client.messages == whole.messages
        ndjson = await http.get(f"/v1/runs/{run_id}/stream?compact=snapshot&format=ndjson")
        assert ndjson.status_code == 422 and ndjson.json()["error"]["code"] == "invalid_request"
        wrong = await http.get(f"/v1/runs/{run_id}/stream?compact=zip")
        assert wrong.status_code == 422 and wrong.json()["error"]["code"] == "invalid_request"


async def test_ag_ui_endpoint_when_last_event_id_mid_run_then_snapshot_then_what_follows(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        started = await http.post("/v1/agents/demo/runs", json={"messages": [USER]})
        run_id = started.json()["run_id"]
        async with http.stream("GET", f"/v1/runs/{run_id}/stream") as response:
            seen = ""
            async for piece in response.aiter_text():
                seen += piece
                if "REASONING_MESSAGE_CONTENT" in seen:
                    break
        last = [ident for ident, _ in frames(seen) if ident is not None][-1]
        joined = await http.post(
            f"{replicas.b}/v1/agents/demo/ag-ui",
            json={"runId": run_id, "messages": []},
            headers={"Last-Event-ID": str(last)},
        )
        assert joined.status_code == 200
        got = frames(joined.text)
        events = [json.loads(d) for _, d in got]
        check_agui_sequence(events)
        assert [e["type"] for e in events[:2]] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
        ids = [ident for ident, _ in got if ident is not None]
        assert ids[0] == last and ids == sorted(set(ids))  # the prefix is "as of" the offset
        stored = (await http.get(f"/v1/runs/{run_id}/events?limit=1000")).json()["events"]
        whole = AguiProjection.for_input({"messages": [USER]})
        for event in stored:
            whole.apply(event["chunk"])
        client = AguiProjection()
        for event in events:
            client.apply(event)
        assert client.messages == whole.messages


async def test_ag_ui_endpoint_when_request_does_not_fit_then_4xx_and_nothing_started(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        started = await http.post("/v1/agents/demo/runs", json={"messages": [USER]})
        run_id = started.json()["run_id"]
        other = await http.post("/v1/agents/approve/ag-ui", json={"runId": run_id})
        assert other.status_code == 409 and other.json()["error"]["code"] == "run_conflict"
        unknown = await http.post("/v1/agents/nobody/ag-ui", json={"runId": "agui-x1"})
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "agent_not_found"
        resume = await http.post(
            "/v1/agents/demo/ag-ui", json={"runId": "agui-x2"}, headers={"Last-Event-ID": "3"}
        )
        assert resume.status_code == 422 and resume.json()["error"]["code"] == "invalid_request"
        bad = await http.post("/v1/agents/demo/ag-ui?compact=zip", json={"runId": "agui-x3"})
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_request"
        for run in ("agui-x1", "agui-x2", "agui-x3"):
            assert (await http.get(f"/v1/runs/{run}")).status_code == 404


async def _answer(http: httpx.AsyncClient, chat: str, messages: list[Any], trigger: str) -> str:
    response = await http.post(
        "/v1/ai-sdk/demo", json={"id": chat, "messages": messages, "trigger": trigger}
    )
    first = json.loads(frames(response.text)[0][1])
    assert first["type"] == "start"
    run_id: str = first["messageId"]
    return run_id


async def test_ai_sdk_messages_when_answer_regenerated_then_only_the_new_answer(
    replicas: Replicas,
) -> None:
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        chat = "chat-regenerate"
        first = await _answer(http, chat, [QUESTION], "submit-message")
        history = (await http.get(f"/v1/ai-sdk/demo/{chat}/messages")).json()
        assert [m["id"] for m in history] == ["u1", first]
        follow_up = {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "And now?"}]}
        second = await _answer(http, chat, [*history, follow_up], "submit-message")
        after = (await http.get(f"/v1/ai-sdk/demo/{chat}/messages")).json()
        assert [m["id"] for m in after] == ["u1", first, "u2", second]
        # Regenerate the last answer: the client drops it and sends the rest.
        third = await _answer(http, chat, after[:3], "regenerate-message")
        final = (await http.get(f"/v1/ai-sdk/demo/{chat}/messages")).json()
    assert [m["id"] for m in final] == ["u1", first, "u2", third]
    assert final[:3] == after[:3]


async def test_ai_sdk_reconnect_when_run_open_then_compact_prefix_with_its_seq_then_each_event(
    replicas: Replicas,
) -> None:
    run, chat = "compact-http", "chat-compact-http"
    words = [f"w{n} " for n in range(300)]
    opening = [
        {"type": "RUN_STARTED", "threadId": chat, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": w} for w in words),
    ]
    later = ["and ", "more"]
    async with httpx.AsyncClient(base_url=replicas.a, timeout=60) as http:
        r = await http.post(f"/v1/runs/{run}/events", json={"events": opening})
        assert r.status_code == 200, r.text
        whole = ""  # ?resume=replay: every chunk again, up to the same seq
        async with http.stream("GET", f"/v1/ai-sdk/demo/{chat}/stream?resume=replay") as answer:
            assert answer.status_code == 200
            async for piece in answer.aiter_text():
                whole += piece
                if any(ident == len(opening) for ident, _ in frames(whole)):
                    break
        assert [json.loads(data).get("delta") for _, data in frames(whole)[2:]] == words
        text = ""
        async with http.stream("GET", f"{replicas.b}/v1/ai-sdk/demo/{chat}/stream") as answer:
            assert answer.status_code == 200
            pieces = answer.aiter_text()
            while not any(ident == len(opening) for ident, _ in frames(text)):
                text += await anext(pieces)
            # Live from here: each later event, framed with its own seq.
            ending = [
                *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": w} for w in later),
                {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
                {"type": "RUN_FINISHED", "threadId": chat, "runId": run},
            ]
            r = await http.post(f"/v1/runs/{run}/events", json={"events": ending, "close": True})
            assert r.status_code == 200, r.text
            async for piece in pieces:
                text += piece
        replayed = await http.get(f"/v1/ai-sdk/demo/{chat}/stream?resume=replay")
    received = frames(text)
    assert received[-1][1] == "[DONE]"
    chunks = [json.loads(data) for _, data in received[:-1]]
    # The prefix: three chunks, the last carrying the seq it was made at.
    assert chunks[:3] == [
        {"type": "start", "messageId": run, "messageMetadata": {"runId": run, "threadId": chat}},
        {"type": "text-start", "id": "m1"},
        {"type": "text-delta", "id": "m1", "delta": "".join(words)},
    ]
    assert [ident for ident, _ in received[:3]] == [None, None, len(opening)]
    # Then the events after it, once each, in order.
    assert [c.get("delta") for c in chunks[3:5]] == later
    assert [ident for ident, _ in received[3:6]] == [len(opening) + n for n in (1, 2, 3)]
    assert [c["type"] for c in chunks[5:]] == ["text-end", "finish"]
    check_ui_stream(chunks, V5_TYPES)
    # The run is closed now: no active run, nothing to resume (replay or not).
    assert replayed.status_code == 204
