"""`LoopEvent`: asyncio.Event's set / clear / wait, bound to its loop once.

Why not asyncio.Event on the hot paths: it looks its loop up on every `wait()`,
and in CPython 3.11 finding the running loop compares the process id, a
`getpid()` system call each time. Where system calls are dear (a sandboxed
kernel) that was a large share of a busy server's CPU: a wait per follower per
commit, a wait per lane per group. This one takes the running loop when it is
made and never asks again; make it inside the loop that waits on it.
"""

from __future__ import annotations

import asyncio


class LoopEvent:
    """Set, clear, wait; `wait()` returns at once while set (as asyncio.Event's)."""

    __slots__ = ("_loop", "_value", "_waiters")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._value = False
        self._waiters: list[asyncio.Future[None]] = []

    def is_set(self) -> bool:
        return self._value

    def set(self) -> None:
        if self._value:
            return
        self._value = True
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def clear(self) -> None:
        self._value = False

    async def wait(self) -> None:
        if self._value:
            return
        waiter = self._loop.create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            # A wait that timed out (tasks.wait_set) must not stay listed until the next set.
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            raise
