"""TanStack AI's own client against the stream: `fetchServerSentEvents` and
`fetchHttpStream` (npm `@tanstack/ai-client`, run with Node) join a live run
through a loopback proxy that cuts their connection mid-stream. The adapters
resume with `Last-Event-ID` on their own; what they yield must be exactly the
stored chunks, once each, in order.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agent_replay.log import EventLog
from tests.stream.conftest import Served
from tests.support.nodejs import node_script
from tests.support.proxies import CuttingProxy

HARNESS = Path(__file__).resolve().parents[1] / "node"
DEADLINE = 60.0


async def _produce(event_log: EventLog, run: str, rng: random.Random) -> None:
    for i in range(40):
        chunks = [
            {
                "type": "TEXT_MESSAGE_CONTENT",
                "messageId": "m1",
                "delta": f"[{i}.{j}]" + "é" * rng.randrange(30),
            }
            for j in range(rng.randrange(1, 8))
        ]
        await event_log.append(run, chunks)
        await asyncio.sleep(rng.choice([0, 0.002, 0.01]))
    await event_log.append(
        run,
        [
            {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
            {"type": "RUN_FINISHED", "threadId": "t1", "runId": run, "finishReason": "stop"},
        ],
        close=True,
    )


async def _join(
    harness: Path, mode: str, url: str, run: str
) -> tuple[int, list[dict[str, object]]]:
    code, out, _ = await node_script(harness, "join.mjs", mode, url, run, deadline=DEADLINE)
    return code, [json.loads(line) for line in out.splitlines()]


@pytest.fixture
async def served_port(served: Served) -> AsyncIterator[int]:
    yield int(served.base_url.rsplit(":", 1)[1])


@pytest.mark.parametrize("mode", ["sse", "http"])
async def test_tanstack_join_when_connection_cut_mid_stream_then_yields_stored_chunks_once(
    node_harness: Path, served_port: int, event_log: EventLog, mode: str
) -> None:
    run = f"ts-{mode}"
    rng = random.Random(mode)
    await event_log.append(
        run,
        [
            {"type": "RUN_STARTED", "threadId": "t1", "runId": run},
            {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        ],
    )
    budgets = [rng.randrange(200, 3000) for _ in range(4)]
    proxy = CuttingProxy(served_port, budgets)
    async with proxy as proxy_port:
        url = f"http://127.0.0.1:{proxy_port}/v1/runs/{run}/stream"
        (code, lines), _ = await asyncio.gather(
            _join(node_harness, mode, url, run), _produce(event_log, run, rng)
        )
    assert code == 0, lines[-1:]
    assert proxy.cuts >= 2 and proxy.connections > proxy.cuts
    stored = [json.loads(e.chunk) for e in await event_log.read_events(run, 0, 10_000)]
    assert [line["chunk"] for line in lines] == stored
