"""`LoopEvent`: asyncio.Event's contract, bound to its loop once."""

from __future__ import annotations

import asyncio
import contextlib

from agent_replay.loopevent import LoopEvent


async def test_wait_when_set_before_then_returns_at_once() -> None:
    event = LoopEvent()
    event.set()
    await asyncio.wait_for(event.wait(), 1)
    assert event.is_set()


async def test_set_when_many_wait_then_every_waiter_wakes_once() -> None:
    event = LoopEvent()
    woke: list[int] = []

    async def waiter(number: int) -> None:
        await event.wait()
        woke.append(number)

    tasks = [asyncio.create_task(waiter(i)) for i in range(50)]
    await asyncio.sleep(0)  # every waiter is now parked on the event
    assert woke == []
    event.set()
    event.set()  # a second set wakes nobody twice
    await asyncio.wait_for(asyncio.gather(*tasks), 5)
    assert sorted(woke) == list(range(50))


async def test_clear_when_set_then_wait_blocks_until_set_again() -> None:
    event = LoopEvent()
    event.set()
    event.clear()
    waiting = asyncio.create_task(event.wait())
    await asyncio.sleep(0)  # its first step: it has returned or is parked on the event
    assert not waiting.done() and not event.is_set()
    event.set()
    await asyncio.wait_for(waiting, 5)


async def test_wait_when_timed_out_then_leaves_no_waiter_behind() -> None:
    # A long-poll that times out on an idle run, over and over, must not grow the
    # event; and a later set still wakes a fresh waiter.
    event = LoopEvent()
    for _ in range(100):
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), 0.001)
    assert event._waiters == []
    fresh = asyncio.create_task(event.wait())
    await asyncio.sleep(0)
    event.set()
    await asyncio.wait_for(fresh, 5)


def test_event_when_made_outside_a_loop_without_one_then_refused() -> None:
    try:
        LoopEvent()
    except RuntimeError:
        return
    raise AssertionError("a LoopEvent made outside a running loop must name one")
