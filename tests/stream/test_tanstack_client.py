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

from service.log import EventLog
from tests.stream.conftest import Served

HARNESS = Path(__file__).resolve().parents[1] / "node"
DEADLINE = 60.0


class CuttingProxy:
    """Forwards loopback TCP; the n-th connection's response is cut after budgets[n] bytes."""

    def __init__(self, target_port: int, budgets: list[int]) -> None:
        self._target = target_port
        self._budgets = budgets
        self.connections = 0
        self.cuts = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> int:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        port: int = self._server.sockets[0].getsockname()[1]
        return port

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        index = self.connections
        self.connections += 1
        budget = self._budgets[index] if index < len(self._budgets) else None
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self._target)

        async def upstream() -> None:
            while data := await reader.read(65536):
                up_writer.write(data)
                await up_writer.drain()
            up_writer.close()

        async def downstream() -> None:
            sent = 0
            while data := await up_reader.read(65536):
                if budget is not None and sent + len(data) >= budget:
                    writer.write(data[: budget - sent])
                    await writer.drain()
                    self.cuts += 1
                    # An abrupt drop, as a dying proxy or network does it.
                    writer.transport.abort()
                    up_writer.transport.abort()
                    return
                writer.write(data)
                await writer.drain()
                sent += len(data)
            writer.close()

        tasks = [asyncio.create_task(upstream()), asyncio.create_task(downstream())]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            await asyncio.wait_for(tasks[1], DEADLINE)
        except (ConnectionError, TimeoutError):
            pass
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            writer.transport.abort()
            up_writer.transport.abort()


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
    proc = await asyncio.create_subprocess_exec(
        "node", "join.mjs", mode, url, run, cwd=harness, stdout=asyncio.subprocess.PIPE
    )
    try:
        async with asyncio.timeout(DEADLINE):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    return proc.returncode or 0, [json.loads(line) for line in out.decode().splitlines()]


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
