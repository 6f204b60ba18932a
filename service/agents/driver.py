"""Drivers: the process-owned tasks that run hosted agents into the log.

A driver reads its upstream in one task and appends in another, so events
that arrive while an append commits go into the next append together. It
holds the run's lease while it drives and renews it; the run is always
closed with a terminal event: the upstream's own, or a RUN_ERROR saying
what went wrong (upstream failure, cancel, shutdown). A reaper closes runs
whose driver's process died (lease expired) with RUN_ERROR "interrupted".

Cancel works across processes without a side channel: it appends RUN_ERROR
and closes the run; the driving process sees `run_closed` on its next append
or lease renewal and aborts its upstream request.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from service import metrics
from service.agents import upstream
from service.agents.catalog import Agent, AgentCatalog, RunInput
from service.errors import ReplayError, RunClosed
from service.log import LogStore, Run, check_run_id
from service.log.chunks import TERMINAL_TYPES, stored

log = logging.getLogger("replay.agents")


def run_error(run_id: str, thread_id: str | None, message: str, code: str) -> dict[str, Any]:
    chunk: dict[str, Any] = {"type": "RUN_ERROR", "runId": run_id}
    if thread_id:
        chunk["threadId"] = thread_id
    chunk.update(message=message, code=code, timestamp=int(time.time() * 1000))
    return chunk


@dataclass(frozen=True, slots=True)
class _End:
    """The reader's last word: why the upstream stream stopped."""

    reason: str  # done | error | cancelled | shutdown | lost
    message: str = ""


@dataclass
class _Drive:
    run_id: str
    thread_id: str
    task: asyncio.Task[None] | None = None
    reader: asyncio.Task[None] | None = None
    stop: str | None = None  # why we asked the reader to stop
    done: asyncio.Event = field(default_factory=asyncio.Event)

    def halt(self, reason: str) -> None:
        self.stop = self.stop or reason
        if self.reader is not None:
            self.reader.cancel()


# Upstream reads (each a list of events) waiting for the appender.
_QUEUE_READS = 256

# How each ending closes the run: (RUN_ERROR code, status to record) or None
# when the run's own terminal event decides.
_CLOSINGS: dict[str, tuple[str, str | None]] = {
    "error": ("upstream_error", None),
    "cancelled": ("cancelled", "cancelled"),
    "shutdown": ("interrupted", "interrupted"),
}


class Drivers:
    def __init__(
        self,
        log: LogStore,
        catalog: AgentCatalog,
        *,
        lease_seconds: float = 30.0,
        idle_seconds: float = 300.0,
        instance_id: str | None = None,
    ) -> None:
        self.log = log
        self.catalog = catalog
        self.lease_seconds = lease_seconds
        self.idle_seconds = idle_seconds
        self.instance_id = instance_id
        instance = instance_id or f"{socket.gethostname()}:{os.getpid()}"
        self.owner = f"{instance}/{uuid.uuid4().hex[:12]}"
        self._drives: dict[str, _Drive] = {}
        self._client: aiohttp.ClientSession | None = None
        self._reaper: asyncio.Task[None] | None = None

    async def start_reaper(self) -> None:
        if self.instance_id:
            # A restart of the same instance: its earlier life's runs are orphans now.
            for run_id in await self.log.orphaned_leases(self.instance_id, self.owner):
                if await self.log.take_over_lease(
                    run_id, self.owner, self.lease_seconds, self.instance_id
                ):
                    await self._terminalize(run_id, "the service restarted while it drove this run")
                    metrics.LEASES_REAPED.inc()
        self._reaper = asyncio.create_task(self._reap_forever(), name="lease-reaper")

    async def close(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reaper
        drives = list(self._drives.values())
        for drive in drives:
            drive.halt("shutdown")
        for drive in drives:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(drive.done.wait(), 10)
        if self._client is not None:
            await self._client.close()

    @property
    def active(self) -> list[str]:
        return list(self._drives)

    async def start(
        self, agent_name: str, run_input: RunInput, *, run_id: str | None = None
    ) -> tuple[Run, bool]:
        """Create the run and hand it to a driver. (run, False) if it already existed."""
        agent = self.catalog.get(agent_name)
        run_id = check_run_id(run_id or _str(run_input.get("runId")) or f"run-{uuid.uuid4().hex}")
        thread_id = _str(run_input.get("threadId")) or f"thread-{uuid.uuid4().hex}"
        run_input = {
            "messages": [], "tools": [], "context": [], "state": {}, "forwardedProps": {},
            **run_input, "runId": run_id, "threadId": thread_id,
        }  # fmt: skip
        existing = await self.log.find_run(run_id)
        if existing is not None:
            return existing, False
        run, created = await self.log.create_run(
            run_id, thread_id=thread_id, agent=agent_name, input=run_input
        )
        if not created:
            return run, False
        # A joiner must see a first event (with its id) at once, even while the
        # upstream connects: TanStack's client gives up a rejoin after 2 s.
        accepted = {
            "type": "CUSTOM", "name": "run.accepted",
            "value": {"runId": run_id, "threadId": thread_id},
            "timestamp": int(time.time() * 1000),
        }  # fmt: skip
        await self.log.append(run_id, [accepted], create=False)
        if not await self.log.claim_lease(run_id, self.owner, self.lease_seconds):
            return run, False
        drive = _Drive(run_id, thread_id)
        self._drives[run_id] = drive
        drive.task = asyncio.create_task(
            self._drive(drive, agent, run_input), name=f"drive-{run_id}"
        )
        return await self.log.get_run(run_id), True

    def closed_elsewhere(self, run_id: str) -> None:
        """The run was closed by someone else (a cancel on another process): stop driving."""
        drive = self._drives.get(run_id)
        if drive is not None:
            drive.halt("lost")

    async def cancel(self, run_id: str) -> Run:
        """Stop a run: RUN_ERROR "cancelled", closed. A closed run is left as it is."""
        drive = self._drives.get(run_id)
        if drive is not None:
            drive.halt("cancelled")
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(drive.done.wait(), 10)
            return await self.log.get_run(run_id)
        run = await self.log.get_run(run_id)
        if not run.closed:
            chunk = run_error(run_id, run.thread_id, "the run was cancelled", "cancelled")
            with contextlib.suppress(RunClosed):
                await self.log.append(
                    run_id, [chunk], close=True, close_status="cancelled", create=False
                )
        return await self.log.get_run(run_id)

    async def _drive(self, drive: _Drive, agent: Agent, run_input: RunInput) -> None:
        # Bounded: an upstream faster than the log waits (TCP backpressure)
        # instead of growing this process's memory.
        queue: asyncio.Queue[list[upstream.Event] | _End] = asyncio.Queue(maxsize=_QUEUE_READS)
        drive.reader = asyncio.create_task(self._read(drive, agent, run_input, queue))
        renewer = asyncio.create_task(self._renew(drive))
        last_type: str | None = None
        try:
            while True:
                items = [await queue.get()]
                while not queue.empty():
                    items.append(queue.get_nowait())
                # The reader's _End is always its last item.
                end = items[-1] if isinstance(items[-1], _End) else None
                events = [e for item in items if not isinstance(item, _End) for e in item]
                if events:
                    chunks = [stored(value, i, text) for i, (value, text) in enumerate(events)]
                    await self.log.append(drive.run_id, chunks, create=False)
                    last_type = chunks[-1].type
                if end is not None:
                    await self._finish(drive, end, last_type)
                    return
        except RunClosed:
            # Closed elsewhere (a cancel on another process): stop reading.
            log.info("run %s was closed while driven; stopping", drive.run_id)
        except ReplayError as exc:
            # The log is unavailable: leave the lease to expire; a reaper closes the run.
            log.error("run %s: cannot append (%s); leaving it to the reaper", drive.run_id, exc)
        finally:
            drive.reader.cancel()
            renewer.cancel()
            self._drives.pop(drive.run_id, None)
            drive.done.set()

    async def _finish(self, drive: _Drive, end: _End, last_type: str | None) -> None:
        if end.reason == "lost":
            return
        if end.reason == "done" and last_type in TERMINAL_TYPES:
            await self.log.append(drive.run_id, [], close=True, create=False)
            return
        message = end.message or "the upstream stream ended without a terminal event"
        code, status = _CLOSINGS.get(end.reason, ("upstream_incomplete", None))
        if end.reason == "cancelled":
            message = "the run was cancelled"
        elif end.reason == "shutdown":
            message = "the service shut down while it drove this run"
        chunk = run_error(drive.run_id, drive.thread_id, message, code)
        await self.log.append(drive.run_id, [chunk], close=True, close_status=status, create=False)

    async def _read(
        self,
        drive: _Drive,
        agent: Agent,
        run_input: RunInput,
        queue: asyncio.Queue[list[upstream.Event] | _End],
    ) -> None:
        try:
            if self._client is None:  # made in the loop it serves
                self._client = aiohttp.ClientSession()
            async for batch in upstream.events(agent, run_input, self._client, self.idle_seconds):
                await queue.put(batch)
            end = _End("done")
        except asyncio.CancelledError:
            # Leaving the upstream request aborts it; say why we stopped.
            end = _End(drive.stop or "cancelled")
        except upstream.UpstreamError as exc:
            end = _End("error", str(exc))
        except Exception as exc:  # an in-process agent's own bug ends its run, not us
            log.exception("agent of run %s failed", drive.run_id)
            end = _End("error", f"the agent failed: {exc!r}")
        # The appender drains the queue, so this waits at most one append.
        await queue.put(end)

    async def _renew(self, drive: _Drive) -> None:
        interval = max(0.2, self.lease_seconds / 3)
        while True:
            await asyncio.sleep(interval)
            try:
                kept = await self.log.renew_lease(drive.run_id, self.owner, self.lease_seconds)
            except Exception:  # a blip: try again next tick, the lease has slack
                log.warning("run %s: lease renewal failed", drive.run_id, exc_info=True)
                continue
            if not kept:
                drive.halt("lost")
                return

    async def _terminalize(self, run_id: str, message: str) -> None:
        run = await self.log.find_run(run_id)
        if run is None or run.closed:
            return
        chunk = run_error(run_id, run.thread_id, message, "interrupted")
        with contextlib.suppress(RunClosed):
            await self.log.append(
                run_id, [chunk], close=True, close_status="interrupted", create=False
            )
        log.warning("run %s: %s; closed as interrupted", run_id, message)

    async def reap_once(self) -> list[str]:
        """Close runs whose driver's lease ran out. Returns the runs this call closed."""
        reaped = []
        for run_id in await self.log.expired_leases():
            if await self.log.claim_expired_lease(run_id, self.owner, self.lease_seconds):
                await self._terminalize(
                    run_id, "the process driving this run stopped (lease expired)"
                )
                metrics.LEASES_REAPED.inc()
                reaped.append(run_id)
        return reaped

    async def _reap_forever(self) -> None:
        interval = max(0.2, self.lease_seconds / 3)
        while True:
            try:
                await self.reap_once()
            except Exception:
                log.warning("lease reaper pass failed", exc_info=True)
            await asyncio.sleep(interval)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
