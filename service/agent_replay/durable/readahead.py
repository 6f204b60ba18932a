"""Read-ahead of JSON catch-up pages: the next page is read while this one is sent.

A catch-up reader follows `Stream-Next-Offset` page after page; without this
each page's query starts only when the client asks for it, after the last
one crossed the network and was parsed. Here, a page that leaves more to
read starts the read of the next one at once, and the next request (from
this client, or another reading the same stretch) takes it ready.

Pages are committed events, which never change, so a page read once is the
right answer for as long as the stream lives: entries are keyed by run id,
the run's creation time (a name deleted and created again keeps its run id,
not its creation time) and the start seq. A page is used as it was read: a
page that reached the tail as it then was (not cut by the limits) is used
only while that is still the tail, so a reader is never answered short of
what it could have had. Bounded in entries and in bytes; the oldest go first.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from agent_replay.log.streams import StreamState

Key = tuple[str, datetime, int]
# (count, last seq, the messages joined with commas)
Read = Callable[[StreamState, int], Awaitable[tuple[int, int, str]]]


@dataclass(frozen=True, slots=True)
class Page:
    end: int
    text: str
    # The tail the page was read up to; `end < upto`: the limits cut it.
    upto: int

    def serves(self, state: StreamState) -> bool:
        return self.end < self.upto or self.upto >= state.last_seq


class ReadAhead:
    def __init__(
        self,
        read: Read,
        *,
        max_pages: int = 32,
        max_bytes: int = 64 << 20,
        max_reading: int = 2,
    ) -> None:
        self._read = read
        self._max_pages = max_pages
        self._max_bytes = max_bytes
        # Reads ahead in flight at once: each holds a pool connection the appends'
        # commits also need, so beyond this a reader reads its next page itself.
        self._max_reading = max_reading
        self._reading = 0
        self._pages: OrderedDict[Key, asyncio.Task[Page]] = OrderedDict()
        # Sizes of the pages read so far (a page in flight has none yet).
        self._sizes: dict[Key, int] = {}
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._pages)

    def reading(self) -> bool:
        """Some page is still being read ahead."""
        return self._reading > 0

    async def page(self, state: StreamState, after: int) -> tuple[int, str]:
        """The page after `after` (end seq, text): read ahead if it was, else read now.

        Then, if the stream goes on past it, the next page's read is started.
        """
        key = (state.run_id, state.created_at, after)
        task = self._pages.get(key)
        page: Page | None = None
        if task is not None:
            self._pages.move_to_end(key)
            try:
                # Shielded: a reader that goes away must not cancel a page others wait for.
                page = await asyncio.shield(task)
            except asyncio.CancelledError:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise  # this request is being cancelled, not the page (evicted)
            except Exception:  # the read failed: read again, now
                page = None
            if page is None or not page.serves(state):
                if self._pages.get(key) is task:
                    self._drop(key)
                page = None
        if page is None:
            page = await self._fetch(state, after)
        if page.end < state.last_seq:
            self._start(state, page.end)
        return page.end, page.text

    async def _fetch(self, state: StreamState, after: int) -> Page:
        count, end, text = await self._read(state, after)
        return Page(end if count else after, text, state.last_seq)

    def _start(self, state: StreamState, after: int) -> None:
        key = (state.run_id, state.created_at, after)
        if key in self._pages or self._reading >= self._max_reading:
            return
        self._reading += 1
        task = asyncio.create_task(self._fetch(state, after), name="durable-read-ahead")
        task.add_done_callback(lambda done: self._settled(key, done))
        self._pages[key] = task
        self._evict()

    def _settled(self, key: Key, task: asyncio.Task[Page]) -> None:
        self._reading -= 1
        if self._pages.get(key) is not task:
            return
        if task.cancelled() or task.exception() is not None or not task.result().text:
            # A failed read, or an empty one (the stream went meanwhile): nothing to keep.
            del self._pages[key]
            return
        self._sizes[key] = len(task.result().text)
        self._bytes += self._sizes[key]
        self._evict()

    def _drop(self, key: Key) -> None:
        task = self._pages.pop(key, None)
        self._bytes -= self._sizes.pop(key, 0)
        if task is not None and not task.done():
            task.cancel()

    def _evict(self) -> None:
        while self._pages and (len(self._pages) > self._max_pages or self._bytes > self._max_bytes):
            self._drop(next(iter(self._pages)))

    async def close(self) -> None:
        tasks = list(self._pages.values())
        self._pages.clear()
        self._sizes.clear()
        self._bytes = 0
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
