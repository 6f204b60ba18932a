"""Background tasks, stopped one way everywhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any, Protocol


class Waitable(Protocol):
    """An event: asyncio.Event, or agent_replay.loopevent.LoopEvent."""

    def wait(self) -> Awaitable[object]: ...


async def stopped(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel `tasks` (None ones skipped) and return once every one has ended."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def wait_set(event: Waitable, seconds: float) -> bool:
    """Wait up to `seconds` for `event`: True if it was set, False if the time ran out.

    Why not `asyncio.wait_for`: on Python 3.11 it swallows a cancellation that
    arrives as the awaited event is set (CPython gh-86296, fixed in 3.12), so a
    loop around it keeps running and `stopped()` waits on it forever: a SIGTERM
    that hung a replica's shutdown. `asyncio.timeout` passes the cancellation on.
    """
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True
