"""The service's periodic expiry sweep (`REPLAY_DURABLE_SWEEP_SECONDS`; 0: off).

Every process sweeps; the log's sweep skips what another holds, so replicas
share the work instead of repeating it. A failed pass (the database away) is
logged and tried again at the next interval: expired streams already answer
404, the sweep only frees their rows.
"""

from __future__ import annotations

import asyncio
import logging

from agent_replay.errors import ReplayError
from agent_replay.log.expiry import SweepReport
from agent_replay.log.streams import StreamStore
from agent_replay.tasks import stopped

log = logging.getLogger("replay.durable")


class Sweeper:
    def __init__(
        self,
        store: StreamStore,
        *,
        interval_seconds: float,
        max_rate: float | None,
        max_streams: int = 10_000,
    ) -> None:
        self.store = store
        self.interval = interval_seconds
        self.max_rate = max_rate
        self.max_streams = max_streams
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self.interval > 0:
            self._task = asyncio.create_task(self._forever(), name="durable-expiry-sweep")

    async def stop(self) -> None:
        await stopped(self._task)
        self._task = None

    async def sweep_once(self) -> SweepReport:
        report = await self.store.sweep_expired(
            max_streams=self.max_streams, max_rate=self.max_rate
        )
        if report.streams:
            log.info(
                "expiry sweep: deleted %d expired streams (%d events)",
                report.streams,
                report.events,
            )
        return report

    async def _forever(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.sweep_once()
            except ReplayError as exc:
                log.warning("expiry sweep failed (%s); next try in %.0f s", exc, self.interval)
