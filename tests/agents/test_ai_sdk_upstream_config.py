"""An agent of `"protocol": "ai-sdk"`: its configuration and the chat request it is posted."""

from __future__ import annotations

import json

import pytest

from agent_replay.agents.ai_sdk import REQUEST_KEY, chat_request
from agent_replay.agents.catalog import HttpAgent, load_catalog
from agent_replay.errors import InvalidRequest


def test_agent_with_protocol_ai_sdk_when_configured_then_kind_names_it() -> None:
    spec = {"next": {"url": "http://127.0.0.1:3000/api/chat", "protocol": "ai-sdk",
                     "on_disconnect": {"policy": "continue"}},
            "plain": {"url": "http://127.0.0.1:3001/agent"}}  # fmt: skip
    catalog = load_catalog(json.dumps(spec), {})
    assert isinstance(catalog.get("next"), HttpAgent)
    assert catalog.get("next").kind == "ai-sdk-http"
    assert catalog.get("plain").kind == "ag-ui-http"


def test_agent_with_unknown_protocol_when_configured_then_refused_naming_the_known() -> None:
    spec = {"next": {"url": "http://127.0.0.1:3000/api/chat", "protocol": "openai"}}
    with pytest.raises(InvalidRequest, match="ag-ui, ai-sdk"):
        load_catalog(json.dumps(spec), {})


def test_run_started_by_the_chat_route_when_posted_upstream_then_the_transport_body_as_sent() -> (
    None
):
    sent = {"id": "chat-old", "messages": [{"id": "u1", "role": "user", "parts": [
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="}]}],
        "trigger": "regenerate-message", "messageId": "a1", "model": "fast"}  # fmt: skip
    run_input = {"threadId": "chat-1", "runId": "run-1", "messages": [], REQUEST_KEY: sent}
    assert chat_request(run_input) == {**sent, "id": "chat-1"}


def test_ag_ui_run_input_when_posted_upstream_then_as_use_chat_would_post_it() -> None:
    run_input = {
        "threadId": "t", "runId": "r", "tools": [], "context": [], "state": {"n": 1},
        "forwardedProps": {"model": "fast"},
        "messages": [
            {"id": "s", "role": "system", "content": "Be brief."},
            {"id": "u", "role": "user", "content": "Weather?"},
            {"id": "a", "role": "assistant", "content": "Looking.", "toolCalls": [
                {"id": "c", "type": "function",
                 "function": {"name": "weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"id": "c-result", "role": "tool", "toolCallId": "c", "content": "{\"t\":-3}"},
            {"id": "u2", "role": "user", "content": "Thanks"},
        ],
    }  # fmt: skip
    assert chat_request(run_input) == {
        "id": "t", "trigger": "submit-message", "model": "fast", "state": {"n": 1},
        "messages": [
            {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
            {"id": "u", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]},
            {"id": "a", "role": "assistant", "parts": [
                {"type": "text", "text": "Looking."},
                {"type": "tool-weather", "toolCallId": "c", "state": "output-available",
                 "input": {"city": "Oslo"}, "output": {"t": -3}}]},
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Thanks"}]},
        ],
    }  # fmt: skip
