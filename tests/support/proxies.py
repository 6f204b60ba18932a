"""A loopback TCP proxy that cuts connections: a dying network, for clients that must resume."""

from __future__ import annotations

import asyncio

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
