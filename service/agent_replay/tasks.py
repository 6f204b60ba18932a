"""Background tasks, stopped one way everywhere."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


async def stopped(*tasks: asyncio.Task[Any] | None) -> None:
    """Cancel `tasks` (None ones skipped) and return once every one has ended."""
    running = [task for task in tasks if task is not None]
    for task in running:
        task.cancel()
    for task in running:
        with contextlib.suppress(asyncio.CancelledError):
            await task
