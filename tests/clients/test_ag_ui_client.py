"""`@ag-ui/client`'s own `HttpAgent` (npm, unmodified) through `/v1/agents/{agent}/ag-ui`,
on two service processes.

Through the endpoint it collects the same messages as on the upstream agent itself (ids
aside: each run mints its own). A client whose connection is cut mid-run leaves the run
going; a second client that knows nothing joins it on the other process with
`?compact=snapshot`, gets a valid AG-UI sequence (the verifier in `runAgent` checks it),
and ends with the same messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.clients.conftest import Replicas, run_node
from tests.clients.upstream import upstream_app
from tests.support.proxies import CuttingProxy
from tests.support.servers import serve_asgi, serve_subprocess


@pytest.fixture(scope="module")
async def upstream() -> AsyncIterator[str]:
    async with serve_asgi(upstream_app(held=frozenset({"agui-demo-http"}))) as base:
        yield base


@pytest.fixture(scope="module")
def agui_replicas(database_url: str, upstream: str) -> Iterator[Replicas]:
    agents = {"demo-http": f"{upstream}/demo", "pydantic": f"{upstream}/pydantic"}
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_HEARTBEAT_SECONDS": "1",
        "REPLAY_AGENTS": json.dumps(agents),
    }
    with serve_subprocess(env) as (a, _), serve_subprocess(env) as (b, _):
        yield Replicas(a, b)


_ID = re.compile(r'"(id|toolCallId|messageId)": "([^"]*)"')


def _normalized(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ids renamed by first appearance: each run mints its own, the shape must not differ."""
    names: dict[str, str] = {}

    text = json.dumps(messages)
    for ident in list(dict.fromkeys(m.group(2) for m in _ID.finditer(text))):
        names.setdefault(ident, f"ID{len(names)}")
    for old, new in sorted(names.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(old, new) if old else text
    value: list[dict[str, Any]] = json.loads(text)
    return value


@pytest.mark.parametrize("agent", ["demo-http", "pydantic"])
async def test_http_agent_when_run_through_endpoint_then_same_messages_as_upstream_and_join(
    node_harness: Path, agui_replicas: Replicas, upstream: str, agent: str
) -> None:
    run_id = f"agui-{agent}"
    proxy = CuttingProxy(agui_replicas.a_port, [1200])
    async with proxy as proxy_port:
        result = await run_node(
            node_harness, "ag_ui.mjs", f"{upstream}/{agent.removesuffix('-http')}",
            agui_replicas.a, f"http://127.0.0.1:{proxy_port}", agui_replicas.b, agent, run_id,
            f"{upstream}/release/{run_id}",
        )  # fmt: skip
    direct = result["direct"]
    assert direct["error"] is None and result["through"]["error"] is None, result
    assert len(direct["messages"]) > 1
    assert _normalized(result["through"]["messages"]) == _normalized(direct["messages"])
    joined = result["joined"]
    assert joined["error"] is None, joined
    assert _normalized(joined["messages"]) == _normalized(direct["messages"])
    async with httpx.AsyncClient(base_url=agui_replicas.b) as http:
        run = (await http.get(f"/v1/runs/{run_id}")).json()
    # The cut client did not stop the run.
    assert run["status"] == "finished", run
    if agent == "demo-http":
        assert proxy.cuts == 1 and result["cut"]["error"] is not None
        # It joined mid-run: a snapshot first, then live content.
        assert joined["types"][:2] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"], joined["types"]
        assert "TEXT_MESSAGE_CONTENT" in joined["types"]
