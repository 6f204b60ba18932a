"""`Outlet` and `Sink`: a caught-up follower's events written by the commit, not its task.

A follower that has everything its channel holds waits for the next commit.
Woken as a task, every event costs it a task step, the resumption of its
body's generator and the response's send chain, for one small write; with a
follower per hosted run that was a large share of a busy server's CPU. So while
it waits, the follower leaves a `Sink` on its channel, and the commit that
buffers the next rows frames them and writes them through the response's
`Outlet` at once. The follower's task wakes only when the sink cannot go on:
a write the response could not take now (a send under way), rows it must read
from the log (the buffer lost its next one), or the run complete. Whatever a
sink did not write, the task sends from the cursor the sink left (a blob the
sink framed but could not write, as it is), so every event goes out once, in
order, by one path or the other, and a stateful framer sees each row once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from agent_replay.loopevent import LoopEvent
from agent_replay.stream.framing import Framer

# Takes a blob and writes it now, or refuses it (False) and writes nothing.
Write = Callable[[bytes], bool]
# Told how many events a sink wrote and how many it knows of past them.
Sent = Callable[[int, int], None]


class Buffer(Protocol):
    """What a sink reads of its channel (`agent_replay.stream.channel.Channel`), named here
    so that the channel, which holds sinks, is not imported by them."""

    @property
    def head(self) -> int | None: ...

    @property
    def complete(self) -> bool: ...

    def pending(self, cursor: int, framer: Framer) -> tuple[bytes, int] | None: ...


class Outlet:
    """The response's synchronous write, once its headers are out (None before)."""

    __slots__ = ("write",)

    def __init__(self) -> None:
        self.write: Write | None = None


class Sink:
    """One waiting follower on its channel: its cursor, how it frames, where it writes."""

    __slots__ = ("attention", "cursor", "framer", "live", "sent", "unsent", "write")

    def __init__(self, cursor: int, framer: Framer, write: Write, sent: Sent) -> None:
        self.cursor = cursor
        self.framer = framer
        self.write = write
        self.sent = sent
        self.live = True
        # A blob framed but refused, and the seq it runs to: the task sends it as it
        # is, since a framer may keep state (`key` None) and must see each row once.
        self.unsent: tuple[bytes, int] | None = None
        # Set once the follower's task must take over again.
        self.attention = LoopEvent()

    def advanced(self, channel: Buffer) -> None:
        """The channel buffered rows or completed: write what follows the cursor."""
        if not self.live:
            return
        buffered = channel.pending(self.cursor, self.framer)
        if buffered is not None:
            blob, last = buffered
            if blob and not self.write(blob):
                self.unsent = (blob, last)
                self.wake()
                return
            self.sent(last - self.cursor, (channel.head or last) - last)
            self.cursor = last
        elif channel.head is not None and channel.head > self.cursor:
            self.wake()  # its next event left the buffer: the task reads the log
            return
        if channel.complete:
            self.wake()  # the task ends the body

    def wake(self) -> None:
        self.live = False
        self.attention.set()
