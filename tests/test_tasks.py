"""`agent_replay.tasks`: background loops stop when cancelled, whatever the timing."""

from __future__ import annotations

import asyncio

import pytest

from agent_replay.loopevent import LoopEvent
from agent_replay.tasks import stopped, wait_set


async def test_wait_set_when_event_set_in_time_then_true() -> None:
    event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_set(event, 30) is True


async def test_wait_set_when_nobody_sets_then_false_after_the_time() -> None:
    loop = asyncio.get_running_loop()
    started = loop.time()
    assert await wait_set(LoopEvent(), 0.05) is False
    assert loop.time() - started >= 0.05


@pytest.mark.parametrize("kind", [asyncio.Event, LoopEvent])
@pytest.mark.parametrize("turns", [0, 1, 2, 3])
async def test_loop_on_wait_set_when_cancelled_as_its_event_is_set_then_stops(
    kind: type[asyncio.Event] | type[LoopEvent], turns: int
) -> None:
    # The shape of every wake-up loop in the service (presence, hub re-check,
    # disconnect watch). With asyncio.wait_for on Python 3.11 the cancel is
    # swallowed for 0-2 turns of the loop between set and cancel, and the loop
    # runs on: `stopped()` never returns and a replica outlives its SIGTERM.
    event = kind()
    woke = 0

    async def wake_loop() -> None:
        nonlocal woke
        while True:
            await wait_set(event, 30)
            event.clear()
            woke += 1

    task = asyncio.create_task(wake_loop())
    await asyncio.sleep(0)  # parked on the event
    event.set()
    for _ in range(turns):
        await asyncio.sleep(0)
    done, _ = await asyncio.wait([asyncio.ensure_future(stopped(task))], timeout=5)
    assert done, "the loop swallowed its cancellation"
    assert task.cancelled()
