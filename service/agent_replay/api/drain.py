"""The drain: what `agent-replay serve` does between SIGTERM and its shutdown.

A hosted run's upstream answer cannot move to another process, so a replica told
to stop first lets the runs it drives finish (up to `REPLAY_DRAIN_SECONDS`) while
everything else moves away from it:

* `/readyz` answers 503 `draining` at once (a load balancer or Kubernetes sends
  no new work);
* a run start, and a new stream (a run's, a chat's, Durable Streams' live
  reads), is refused with 503 `draining` before it has any effect, which the
  shipped nginx configuration retries on another replica;
* open streams end cleanly (the run streams through sse-starlette's
  `AppStatus`, as at shutdown; Durable Streams' long-polls and SSE through the
  hub), and their clients resume from their last id elsewhere, through the
  proxy, while the upstreams they follow keep being driven here;
* appends, reads and cancels are served as usual: the socket stays open.

Once no run is driven here, or at the deadline, the drain hands over to
uvicorn's own graceful shutdown, exactly what the signal did before: what is
still driven then ends `interrupted`. A second SIGTERM or SIGINT during the
drain skips the rest of it (that same shutdown, at once); uvicorn's own rule
then applies to a further SIGINT (stop without waiting for anything).

The signal is taken where uvicorn receives it: the handler uvicorn installs
(a bound method of its `Server`) is wrapped for the lifespan's length, in the
main thread of each process that serves (with `--workers N` the parent passes
one SIGTERM on to each worker, which drains by itself). An app served any
other way (a test's server in a thread) is left as it was.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from sse_starlette.sse import AppStatus

from agent_replay import metrics
from agent_replay.agents import Drivers
from agent_replay.stream import Hub
from agent_replay.tasks import stopped

log = logging.getLogger("replay")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Drain:
    def __init__(self, drivers: Drivers, hub: Hub, seconds: float) -> None:
        self.drivers = drivers
        self.hub = hub
        self.seconds = seconds
        # serving -> draining -> stopping (uvicorn's shutdown has been asked for)
        self.state = "serving"
        self._handlers: dict[int, Any] = {}
        self._signal: int = signal.SIGTERM
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def draining(self) -> bool:
        return self.state == "draining"

    def install(self) -> Callable[[], None]:
        """Take SIGTERM and SIGINT from the uvicorn server serving this app; returns the undo."""
        handler = signal.getsignal(signal.SIGTERM)
        server = getattr(handler, "__self__", None)
        if threading.current_thread() is not threading.main_thread() or not hasattr(
            server, "should_exit"
        ):
            return lambda: None
        self._loop = asyncio.get_running_loop()
        self._handlers = {sig: signal.getsignal(sig) for sig in _SIGNALS}
        for sig in _SIGNALS:
            signal.signal(sig, self._on_signal)
        stop_gauge = metrics.sample("replay_draining", lambda: float(self.draining))

        def undo() -> None:
            stop_gauge()
            for sig, previous in self._handlers.items():
                if signal.getsignal(sig) == self._on_signal:
                    signal.signal(sig, previous)

        return undo

    async def stop(self) -> None:
        """The lifespan ends: a drain still under way ends with it."""
        await stopped(self._task)

    def _on_signal(self, sig: int, frame: FrameType | None) -> None:
        if self.state == "serving" and self.seconds > 0 and self._loop is not None:
            self.state = "draining"
            self._signal = sig
            self._loop.call_soon_threadsafe(self._begin)
            return
        if self.state == "draining":
            log.warning("a second signal: the drain stops; runs still driven end `interrupted`")
        self._stop_now(sig, frame)

    def _begin(self) -> None:
        if self.state == "draining":
            self._task = asyncio.get_running_loop().create_task(self._drain(), name="drain")

    def _stop_now(self, sig: int, frame: FrameType | None) -> None:
        """Hand over to uvicorn's shutdown, as if the signal reached it now."""
        self.state = "stopping"
        previous = self._handlers.get(sig)
        if callable(previous):
            previous(sig, frame)

    async def _drain(self) -> None:
        started = time.monotonic()
        self.drivers.drain()
        self.hub.drain()
        # The run streams (agent_replay.api.sse.StreamResponse) end when this is set, as
        # they do at shutdown; it is sse-starlette's documented switch for that.
        AppStatus.should_exit = True
        runs = len(self.drivers.active)
        log.info(
            "draining: %d hosted runs go on to their end, for up to %gs",
            runs,
            self.seconds,
            extra={"fields": {"event": "drain_started", "runs": runs, "seconds": self.seconds}},
        )
        finished = await self.drivers.idle(self.seconds)
        left = len(self.drivers.active)
        took = round(time.monotonic() - started, 3)
        fields = {"event": "drain_ended", "runs": runs, "left": left, "seconds": took}
        if finished:
            log.info("drained in %.1fs: every hosted run ended", took, extra={"fields": fields})
        else:
            log.warning(
                "drain deadline after %.1fs: %d hosted runs end `interrupted`",
                took,
                left,
                extra={"fields": fields},
            )
        if self.state == "draining":
            self._stop_now(self._signal, None)
