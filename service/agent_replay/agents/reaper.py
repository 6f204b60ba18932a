"""`Reaper`: closes runs whose driver died, so no reader waits forever.

A driver holds its run's lease and renews it; a lease that ran out means the
process driving the run died. Every process reaps: it takes such a lease over
(one UPDATE, so two reapers never both win) and closes the run with the
RUN_ERROR its `EndReason` maps to. At start, a process with a stable
instance id also closes at once the runs its earlier life was driving.

A run whose budget's time ran out (by its creation time in the log) is closed
`budget_exhausted` instead of `interrupted`: nobody drives it, but its budget
says it ends now either way. Such a run is reaped on the first pass that finds
its lease run out, without the pass of suspicion (below): a live driver would
close it `budget_exhausted` too, so taking it over changes nothing, and its
end comes no later than a pass after its lease ran out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Protocol

from agent_replay import metrics
from agent_replay.agents import budget
from agent_replay.agents.driver import Lease
from agent_replay.agents.endings import ENDINGS, EndReason, close_run
from agent_replay.errors import RunClosed
from agent_replay.log import Appends, Leases, RunStates
from agent_replay.tasks import stopped

log = logging.getLogger("replay.agents")


class ReaperLog(Leases, RunStates, Appends, Protocol):
    """What the reaper asks of the log: leases run out, the runs they held, their close."""


class Reaper:
    def __init__(self, log: ReaperLog, lease: Lease, *, instance_id: str | None = None) -> None:
        self.log = log
        self.lease = lease
        self.instance_id = instance_id
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Close this instance's orphans (a restart), then reap expired leases until `stop`."""
        if self.instance_id:
            owner, seconds = self.lease.owner, self.lease.seconds
            for run_id in await self.log.orphaned_leases(self.instance_id, owner):
                if await self.log.take_over_lease(run_id, owner, seconds, self.instance_id):
                    await self.close(run_id, EndReason.RESTARTED)
                    metrics.LEASES_REAPED.inc()
        self._task = asyncio.create_task(self._reap_forever(), name="lease-reaper")

    async def stop(self) -> None:
        await stopped(self._task)
        self._task = None

    async def reap_once(self) -> list[str]:
        """Close runs whose driver's lease ran out. Returns the runs this call closed."""
        return await self._reap(await self.log.expired_leases())

    async def _reap(self, run_ids: Iterable[str]) -> list[str]:
        reaped = []
        owner, seconds = self.lease.owner, self.lease.seconds
        for run_id in run_ids:
            if await self.log.claim_expired_lease(run_id, owner, seconds):
                await self.close(run_id, EndReason.EXPIRED)
                metrics.LEASES_REAPED.inc()
                reaped.append(run_id)
        return reaped

    async def close(self, run_id: str, reason: EndReason) -> None:
        """Close an open run nobody drives as `reason` says (a closed one is left as it is)."""
        run = await self.log.find_run(run_id)
        if run is None or run.closed:
            return
        detail = budget.from_metadata(run.metadata).out_of_time(run.created_at, time.time())
        if detail is not None:
            reason = EndReason.BUDGET_EXHAUSTED
        try:
            await close_run(self.log, run_id, run.thread_id, reason, detail or "")
        except RunClosed:
            return  # closed by someone else meanwhile
        if detail is not None:
            metrics.BUDGETS_EXHAUSTED.labels("max_seconds").inc()
        ending = ENDINGS[reason]
        log.warning("run %s: %s; closed", run_id, detail or (ending and ending.message) or reason)

    async def due(self, expired: set[str], suspects: set[str]) -> set[str]:
        """Of the runs whose lease ran out, those to reap now: the ones already run out a
        pass ago (`suspects`), and the ones whose budget's time has run out."""
        return expired & suspects | await self._out_of_time(expired - suspects)

    async def _out_of_time(self, run_ids: Iterable[str]) -> set[str]:
        """Those of `run_ids` whose budget's time has run out."""
        now, out = time.time(), set()
        for run_id in run_ids:
            run = await self.log.find_run(run_id)
            if run is not None and budget.from_metadata(run.metadata).out_of_time(
                run.created_at, now
            ):
                out.add(run_id)
        return out

    async def _reap_forever(self) -> None:
        # A lease is reaped once it has stayed run out for a whole pass. After a database
        # outage every driver's renewal lands within a fraction of a second of the
        # database answering; without that pass a lease that ran out during an outage
        # shorter than itself (it was last renewed up to a pass before) could be taken
        # from a live driver by the first pass after.
        suspects: set[str] = set()
        while True:
            try:
                expired = set(await self.log.expired_leases())
                await self._reap(await self.due(expired, suspects))
                suspects = expired
            except Exception:  # the reaper must outlive one failed pass
                log.warning("lease reaper pass failed", exc_info=True)
            await asyncio.sleep(self.lease.interval)
