"""`Drivers`: this process's registry of hosted runs.

It starts a run (creates it, logs `run.accepted`, claims the lease) and hands
it to a `Driver`; it renews every driven run's lease (one statement for all),
cancels, drains (refuses new runs while those it drives go on), stops on shutdown,
and relays "closed elsewhere" to the run's driver.
Its `Reaper` closes the runs whose driver's process died.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from typing import Any, Protocol

from agent_replay.agents import budget, policy
from agent_replay.agents.catalog import AgentCatalog, RunInput
from agent_replay.agents.driver import Driver, Lease
from agent_replay.agents.endings import EndReason, close_run
from agent_replay.agents.reaper import Reaper
from agent_replay.errors import Draining, RunClosed
from agent_replay.ingest import DEFAULT_MAX_WINDOW, NONE, Limits, Redactor, RuleSet, parse_rules
from agent_replay.log import Appends, Leases, ReaderPresence, Run, RunStates, check_run_id
from agent_replay.tasks import stopped, wait_set

log = logging.getLogger("replay.agents")

# How long a cancel or a shutdown waits for a driver to close its run.
_HALT_SECONDS = 10
# A lease renewal that failed is tried again this soon.
_RENEW_RETRY_SECONDS = 0.25


class HostedLog(Appends, RunStates, Leases, ReaderPresence, Protocol):
    """What hosting runs asks of the log: its drivers' and its reaper's roles together."""


class Drivers:
    def __init__(
        self,
        log: HostedLog,
        catalog: AgentCatalog,
        *,
        lease_seconds: float = 30.0,
        idle_seconds: float = 300.0,
        first_reader_seconds: float = policy.FIRST_READER_SECONDS,
        instance_id: str | None = None,
        limits: Limits | None = None,
        redact: RuleSet = NONE,
        redact_max_window: int = DEFAULT_MAX_WINDOW,
    ) -> None:
        self.log = log
        self.catalog = catalog
        self.lease_seconds = lease_seconds
        self.idle_seconds = idle_seconds
        self.first_reader_seconds = first_reader_seconds
        self.instance_id = instance_id
        self.limits = limits or Limits()
        # REPLAY_REDACT's rules: every run's, whatever its agent or input add.
        self.redact = redact
        self.redact_max_window = redact_max_window
        instance = instance_id or f"{socket.gethostname()}:{os.getpid()}"
        self.owner = f"{instance}/{uuid.uuid4().hex[:12]}"
        self.lease = Lease(self.owner, lease_seconds)
        self.reaper = Reaper(log, self.lease, instance_id=instance_id)
        self._drivers: dict[str, Driver] = {}
        self._keeper: asyncio.Task[None] | None = None
        # Set by `drain()`: a start is refused before it touches the log, so the
        # client's retry (through the proxy, on another replica) is the run's first.
        self.draining = False

    async def start_reaper(self) -> None:
        await self.reaper.start()

    async def reap_once(self) -> list[str]:
        return await self.reaper.reap_once()

    async def close(self) -> None:
        await self.reaper.stop()
        await stopped(self._keeper)
        self._keeper = None
        drivers = list(self._drivers.values())
        for driver in drivers:
            driver.halt(EndReason.SHUTDOWN)
        for driver in drivers:
            await driver.wait(_HALT_SECONDS)

    @property
    def active(self) -> list[str]:
        return list(self._drivers)

    def drain(self) -> None:
        """Refuse new runs from now on; the runs driven here go on."""
        self.draining = True

    async def idle(self, seconds: float) -> bool:
        """Wait up to `seconds` for no run to be driven here: False if some still are."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while self._drivers:
            driver = next(iter(self._drivers.values()))
            # A driver leaves the registry before it sets `done`: no turn spins on one.
            if not await wait_set(driver.done, deadline - loop.time()):
                return not self._drivers
        return True

    async def start(
        self,
        agent_name: str,
        run_input: RunInput,
        *,
        run_id: str | None = None,
        on_disconnect: str | None = None,
        budget_header: str | None = None,
        forwarded: Mapping[str, str] | None = None,
    ) -> tuple[Run, bool]:
        """Create the run and hand it to a driver. (run, False) if it already existed.

        The run's disconnect policy is the input's `onDisconnect` or the
        `X-On-Disconnect` header's (`on_disconnect`), else its agent's. Its budget
        is its agent's, tightened by the input's `budget` and `X-Budget`
        (`budget_header`); it is stored in the run's metadata, where whichever
        process drives or reaps the run reads it. `forwarded`: the starting request's
        headers its HTTP upstream is sent (`agent_replay.agents.forwarding`), held by the
        driver alone; a join of an existing run drops them (it starts nothing).
        """
        if self.draining:
            raise Draining("this replica is draining before it stops: start the run on another")
        agent = self.catalog.get(agent_name)
        run_input = dict(run_input)
        chosen = policy.choose(
            agent.on_disconnect, run_input.pop("onDisconnect", None), on_disconnect
        )
        # Checked before anything is stored: a malformed budget starts nothing.
        run_budget = budget.choose(agent.budget, run_input.pop("budget", None), budget_header)
        # The run's rules add to its agent's, which add to the service's: none is dropped.
        # A malformed one is refused here, before anything is stored.
        rules = self.redact.plus(agent.redact).plus(
            parse_rules(run_input.pop("redact", None), "the run's redact", self.redact_max_window)
        )
        redactor = Redactor(rules) if rules else None
        run_id = check_run_id(run_id or _str(run_input.get("runId")) or f"run-{uuid.uuid4().hex}")
        existing = await self.log.find_run(run_id)
        # A retry that leaves the thread out means the thread the run already has.
        thread_id = (
            _str(run_input.get("threadId"))
            or (existing.thread_id if existing else None)
            or f"thread-{uuid.uuid4().hex}"
        )
        run_input = {
            "messages": [], "tools": [], "context": [], "state": {}, "forwardedProps": {},
            **run_input, "runId": run_id, "threadId": thread_id,
        }  # fmt: skip
        # The same request again joins the run; another one under its id is a conflict
        # (409 run_conflict), never a silent replay of a different answer.
        # The input goes to the upstream as sent; the run record keeps it redacted.
        stored_input = run_input if redactor is None else redactor.value(run_input)
        run, created = await self.log.create_run(
            run_id, thread_id=thread_id, agent=agent_name, input=stored_input,
            on_disconnect=chosen.policy, grace_seconds=chosen.grace_seconds,
            metadata={"budget": run_budget.to_json()} if run_budget else {},
        )  # fmt: skip
        if not created:
            return run, False
        # A joiner must see a first event (with its id) at once, even while the
        # upstream connects: TanStack's client gives up a rejoin after 2 s.
        accepted = {
            "type": "CUSTOM", "name": "run.accepted",
            "value": {"runId": run_id, "threadId": thread_id},
            "timestamp": int(time.time() * 1000),
        }  # fmt: skip
        first = await self.log.append(run_id, [accepted], create=False)
        if not await self.log.claim_lease(run_id, self.owner, self.lease_seconds):
            return run, False
        driver = Driver(
            self.log, run_id, thread_id, agent, run_input,
            lease=self.lease, idle_seconds=self.idle_seconds, limits=self.limits,
            next_seq=first.last_seq + 1, on_disconnect=chosen,
            first_reader_seconds=self.first_reader_seconds,
            budget=run_budget, created_at=run.created_at, redactor=redactor,
            forwarded=forwarded,
        )  # fmt: skip
        self._drivers[run_id] = driver
        if self._keeper is None:  # made in the loop it serves
            self._keeper = asyncio.create_task(self._keep_leases(), name="lease-keeper")
        driver.start(self._forget)
        return await self.log.get_run(run_id), True

    async def _keep_leases(self) -> None:
        """Renew every driven run's lease, a third of a lease apart, in one statement.

        A run not renewed was closed (a cancel anywhere) or taken over by a reaper
        after an outage longer than its lease: its driver stops. One statement for
        all runs, not a renewal task per run: at hundreds of runs those were a
        steady stream of pool round trips, each costing more than an append.
        """
        lease = self.lease
        wait = lease.interval
        while True:
            await asyncio.sleep(wait)
            runs = list(self._drivers)
            if not runs:
                wait = lease.interval
                continue
            try:
                kept = await self.log.renew_leases(runs, lease.owner, lease.seconds)
            except Exception:
                # The database is away: renew the moment it is back, before any reaper
                # (which waits a pass more; see Reaper) may count the leases as run out.
                log.warning("renewing %d leases failed; retrying", len(runs))
                wait = _RENEW_RETRY_SECONDS
                continue
            wait = lease.interval
            for run_id in runs:
                driver = self._drivers.get(run_id)
                if run_id not in kept and driver is not None:
                    driver.halt(EndReason.LOST)

    def _forget(self, driver: Driver) -> None:
        if self._drivers.get(driver.run_id) is driver:
            del self._drivers[driver.run_id]

    def closed_elsewhere(self, run_id: str) -> None:
        """The run was closed by someone else (a cancel on another process): stop driving."""
        driver = self._drivers.get(run_id)
        if driver is not None:
            driver.halt(EndReason.LOST)

    def readers_left(self, run_id: str) -> None:
        """Nobody reads the run any more (on any process): its driver judges its policy now."""
        driver = self._drivers.get(run_id)
        if driver is not None:
            driver.readers_left()

    async def cancel(self, run_id: str) -> Run:
        """Stop a run: RUN_ERROR "cancelled", closed. A closed run is left as it is."""
        driver = self._drivers.get(run_id)
        if driver is not None:
            driver.halt(EndReason.CANCELLED)
            await driver.wait(_HALT_SECONDS)
            return await self.log.get_run(run_id)
        run = await self.log.get_run(run_id)
        if not run.closed:
            with contextlib.suppress(RunClosed):
                await close_run(self.log, run_id, run.thread_id, EndReason.CANCELLED)
        return await self.log.get_run(run_id)


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
