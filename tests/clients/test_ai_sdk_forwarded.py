"""A Next.js chat moved onto the service: the page's `DefaultChatTransport` sends the
service's key, the user's cookie and a header of the app's own (`headers`, `credentials`);
the hosted AI SDK backend (the real `ai` package, tests/node/ai_sdk_upstream.mjs) gets the
cookie and the header as if the page had called it directly, and never the service's key.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tests.clients.conftest import run_node
from tests.clients.test_ai_sdk_upstream import ai_sdk_backend
from tests.support.servers import serve_subprocess

KEY = "service-key-for-the-page-51e0b7aa"
COOKIE = "next-auth.session-token=user-session-8c2d41"
USER = "user-8c2d41"


@pytest.mark.parametrize("package", ["ai5", "ai"])
async def test_use_chat_transport_with_headers_when_backend_hosted_then_user_headers_arrive_not_key(
    node_harness: Path, database_url: str, package: str
) -> None:
    async with ai_sdk_backend(node_harness, package) as upstream:
        agents = {"next": {"url": f"{upstream}/api/chat/full", "protocol": "ai-sdk",
                           "forward_headers": ["cookie", "x-user-id"]}}  # fmt: skip
        env = {
            "REPLAY_DATABASE_URL": database_url,
            "REPLAY_AGENTS": json.dumps(agents),
            "REPLAY_API_KEYS": KEY,
        }
        with serve_subprocess(env) as (service, _):
            sent = {"Authorization": f"Bearer {KEY}", "Cookie": COOKIE, "X-User-Id": USER}
            result = await run_node(
                node_harness, "ai_sdk_forwarded.mjs", package, f"{service}/v1/ai-sdk/next",
                f"chat-fw-{package}", json.dumps(sent),
            )  # fmt: skip
        async with httpx.AsyncClient(base_url=upstream, timeout=30) as http:
            requests = (await http.get("/requests")).json()

    assert "error" not in result, result
    assert result["message"]["parts"][-1]["text"] == "It is 21 degrees in Paris."
    [request] = [r for r in requests if r["body"]["id"] == f"chat-fw-{package}"]
    assert request["headers"]["cookie"] == COOKIE
    assert request["headers"]["x-user-id"] == USER
    assert "authorization" not in request["headers"]
    assert KEY not in json.dumps(request)
