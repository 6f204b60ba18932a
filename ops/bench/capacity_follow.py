"""Start and follow runs for ops/bench/capacity.py: one client process of several.

    python ops/bench/capacity_follow.py      (a job as one JSON line on stdin)

The job: {"system", "start_url", "follow_url" (with {run}), "runs": [{"id", "spec"}],
"deadline_s", "late_ms"}. The worker starts every run (POST, a few at once), prints
{"started": n}, waits for the line "follow", then opens one SSE follower per
run and reads each until its RUN_FINISHED (the highest `n`) or the deadline.
Every second it prints {"progress": ...} (events, late ones, broken runs); a
"stop" line ends it early. Last it prints {"result": ...}: a latency
histogram (0.1 ms buckets) of every event sent while its follower was
attached, and per-run loss, duplicates and order.

Latency is the follower's `time.monotonic()` when a read arrives minus the
event's `sentAt` from the upstream's (CLOCK_MONOTONIC is shared by every
process on a machine). The three systems differ only in their two URLs and
in how a stream's data lines wrap events: one object (replay, and the
upstream's own SSE passed through by resumable-stream) or a JSON array of
them (a Durable Streams JSON stream's `event: data`).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))

from capacity_upstream import run as run_loop

BUCKET_MS = 0.1
BUCKETS = 50_000  # 0.1 ms steps up to 5 s; the last bucket holds the rest
LATE_MS = 100.0
# Starts and follower connects in flight at once, per worker (a burst of
# thousands would measure the accept queue, not the system).
OPENING = 16


class Follow:
    """One run's follower: what arrived, in what order, how late."""

    __slots__ = ("attached", "disorder", "done", "dups", "error", "next", "run", "seen", "total")

    def __init__(self, run: str) -> None:
        self.run = run
        self.attached = 0.0
        self.next = 0  # the n expected next
        self.seen: set[int] = set()
        self.dups = 0
        self.disorder = 0
        self.done = False
        self.error = ""
        self.total: int | None = None  # known once RUN_FINISHED arrived


class Worker:
    def __init__(self, job: dict[str, Any]) -> None:
        self.job = job
        self.hist = [0] * (BUCKETS + 1)
        self.latencies = 0
        self.late = 0
        self.events = 0
        self.follows = [Follow(r["id"]) for r in job["runs"]]
        self.lag = [0] * 1001  # event-loop lag, 1 ms buckets
        self.stopping = asyncio.Event()
        self.attached = 0
        self.late_ms = float(job.get("late_ms", LATE_MS))

    def take(self, follow: Follow, payload: bytes, now: float) -> None:
        value = orjson.loads(payload)
        for event in value if isinstance(value, list) else (value,):
            n = event.get("n") if isinstance(event, dict) else None
            if n is None:
                continue  # the service's own events (replay's run.accepted)
            self.events += 1
            if n in follow.seen:
                follow.dups += 1
                continue
            follow.seen.add(n)
            if n != follow.next:
                follow.disorder += 1
            follow.next = n + 1
            sent = event.get("sentAt")
            if sent is not None and sent >= follow.attached:
                ms = (now - sent) * 1000
                self.hist[min(int(ms / BUCKET_MS), BUCKETS)] += 1
                self.latencies += 1
                if ms >= self.late_ms:
                    self.late += 1
            if event.get("type") == "RUN_FINISHED":
                follow.total = n + 1
                follow.done = True

    async def start_all(self, http: aiohttp.ClientSession) -> None:
        gate = asyncio.Semaphore(OPENING)
        url = self.job["start_url"]

        async def start(run: dict[str, Any], follow: Follow) -> None:
            body = {"runId": run["id"], "threadId": run["id"],
                    "forwardedProps": {"capacity": run["spec"]}}  # fmt: skip
            async with gate:
                try:
                    async with http.post(url.format(run=run["id"]), json=body) as r:
                        if r.status >= 300:
                            follow.error = f"start: HTTP {r.status} {(await r.text())[:200]}"
                except aiohttp.ClientError as exc:
                    follow.error = f"start: {exc!r}"

        await asyncio.gather(
            *(start(r, f) for r, f in zip(self.job["runs"], self.follows, strict=True))
        )

    async def follow_all(self, http: aiohttp.ClientSession) -> None:
        gate = asyncio.Semaphore(OPENING)
        url = self.job["follow_url"]

        async def follow(f: Follow) -> None:
            if f.error:
                return
            try:
                async with gate:
                    f.attached = time.monotonic()
                    response = await http.get(
                        url.format(run=f.run), headers={"Accept": "text/event-stream"}
                    )
                async with response:
                    if response.status != 200:
                        f.error = f"follow: HTTP {response.status} {(await response.text())[:200]}"
                        return
                    self.attached += 1
                    if self.attached == sum(1 for x in self.follows if not x.error):
                        self.emit({"attached": self.attached})
                    await self.read(f, response)
                    if not f.done:
                        f.error = "follow: the stream ended before RUN_FINISHED"
            except aiohttp.ClientError as exc:
                f.error = f"follow: {exc!r}"

        tasks = [asyncio.create_task(follow(f)) for f in self.follows]
        everyone: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
        stop: asyncio.Future[Any] = asyncio.ensure_future(self.stopping.wait())
        await asyncio.wait(
            [everyone, stop], timeout=self.job["deadline_s"], return_when=asyncio.FIRST_COMPLETED
        )
        for task in (*tasks, stop):
            task.cancel()
        await asyncio.gather(everyone, stop, return_exceptions=True)

    async def read(self, f: Follow, response: aiohttp.ClientResponse) -> None:
        buffer = b""
        async for data in response.content.iter_any():
            now = time.monotonic()
            buffer += data
            if b"\r" in buffer:
                buffer = buffer.replace(b"\r\n", b"\n")
            *blocks, buffer = buffer.split(b"\n\n")
            for block in blocks:
                kind = b""
                lines = []
                for line in block.split(b"\n"):
                    if line.startswith(b"data:"):
                        lines.append(line[5:])
                    elif line.startswith(b"event:"):
                        kind = line[6:].strip()
                if lines and kind in (b"", b"data", b"message"):
                    self.take(f, b"\n".join(lines), now)
            if f.done:
                return

    async def watch_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.05)
            lag = int((loop.time() - before - 0.05) * 1000)
            self.lag[min(max(lag, 0), 1000)] += 1

    async def report(self) -> None:
        while True:
            await asyncio.sleep(1)
            self.emit({"progress": self.progress()})

    def progress(self) -> dict[str, int]:
        broken = sum(1 for f in self.follows if f.error or f.dups or f.disorder)
        done = sum(1 for f in self.follows if f.done)
        return {"events": self.events, "late": self.late, "latencies": self.latencies,
                "broken": broken, "done": done}  # fmt: skip

    def result(self) -> dict[str, Any]:
        runs = []
        for f in self.follows:
            runs.append(
                {"run": f.run, "received": len(f.seen), "total": f.total, "dups": f.dups,
                 "disorder": f.disorder, "done": f.done, "error": f.error,
                 "highest": max(f.seen, default=-1)}
            )  # fmt: skip
        sparse = {str(i): c for i, c in enumerate(self.hist) if c}
        lag = {str(i): c for i, c in enumerate(self.lag) if c}
        return {"hist": sparse, "runs": runs, "loop_lag_ms": lag, **self.progress()}

    @staticmethod
    def emit(message: dict[str, Any]) -> None:
        sys.stdout.write(orjson.dumps(message).decode() + "\n")
        sys.stdout.flush()


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    job = orjson.loads(await reader.readline())
    worker = Worker(job)
    connector = aiohttp.TCPConnector(limit=0, force_close=False)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        watcher = asyncio.create_task(worker.watch_loop())
        await worker.start_all(http)
        worker.emit({"started": len(worker.follows)})
        command = (await reader.readline()).strip()
        if command == b"follow":

            async def commands() -> None:
                while line := await reader.readline():
                    if line.strip() == b"stop":
                        worker.stopping.set()
                        return

            listener = asyncio.create_task(commands())
            reporter = asyncio.create_task(worker.report())
            await worker.follow_all(http)
            reporter.cancel()
            listener.cancel()
        watcher.cancel()
    worker.emit({"result": worker.result()})


if __name__ == "__main__":
    run_loop(main())
