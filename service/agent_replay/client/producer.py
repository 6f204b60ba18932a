"""`Producer`: one run's appends over HTTP, batched, retried, stored exactly once.

Chunks are queued by `submit` (or `send`, which waits for them) and posted in
order, one request in flight at a time: whatever queues while a request is
out goes in the next one, so a fast producer makes big batches and a slow one
gets each chunk acknowledged at once (no waiting window).

Every batch carries `expected_seq`, the seq its first chunk must get. That
is what makes retrying safe: a batch the service already stored there with
the same content is answered as the first time and adds nothing, so when an
answer is lost (a 503 after a commit timed out, a reset connection, a
replica killed mid-request) the batch is simply sent again. What is retried,
and what is not:

    retried, same batch, same expected_seq      raised (ProducerError)
    ─────────────────────────────────────────   ─────────────────────────────
    503 unavailable (waits Retry-After),        409 seq_conflict: another
    502, 504, 429; refused, reset, timed-out    writer appended to the run
    connections; an answer cut short            409 run_closed, any other 4xx
                                                failing longer than give_up_after

Given several base URLs (replicas without a load balancer in front), a request
whose connection fails goes to the next one.

The producer must be the run's only writer for `expected_seq` to mean
anything; it learns where the run is at its first batch (`next_seq`, or the
run's `last_seq` + 1 read from the service).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from agent_replay.tasks import stopped

# Statuses that mean "not now": nothing was stored, or what was is found again by
# expected_seq. 502/504: a load balancer in front of a replica that went away.
_RETRYABLE = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Backoff between attempts: exponential from `first_delay` to `max_delay`, full jitter,
    never less than the service's `Retry-After`; give up after `give_up_after` seconds of
    failing (None: never)."""

    first_delay: float = 0.05
    max_delay: float = 2.0
    give_up_after: float | None = 120.0
    request_timeout: float = 15.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.max_delay, self.first_delay * 2**attempt)
        wait = random.uniform(ceiling / 2, ceiling)
        return max(wait, min(retry_after, self.max_delay)) if retry_after else wait


@dataclass(frozen=True, slots=True)
class Ack:
    """An acknowledged batch: its seqs (`first_seq` None for a bare close)."""

    first_seq: int | None
    last_seq: int


class ProducerError(Exception):
    """The service refused a batch for good (or stayed unreachable past `give_up_after`)."""

    def __init__(
        self, code: str, message: str, *, status: int | None = None, last_seq: int | None = None
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.last_seq = last_seq


class _Retry(Exception):
    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.retry_after = retry_after


@dataclass(slots=True)
class _Queued:
    body: bytes  # the chunk as JSON
    future: asyncio.Future[int]


class Producer:
    """Appends to one run. Use as `async with`; leaving it flushes what is queued."""

    def __init__(
        self,
        base_url: str | Sequence[str],
        run_id: str,
        *,
        api_key: str | None = None,
        session: aiohttp.ClientSession | None = None,
        policy: RetryPolicy | None = None,
        next_seq: int | None = None,
        max_batch_events: int = 1000,
        max_batch_bytes: int = 4 << 20,
    ) -> None:
        # Several replicas (no load balancer in front): a connection that fails moves to
        # the next one; the batch and its expected_seq stay the same.
        bases = [base_url] if isinstance(base_url, str) else list(base_url)
        if not bases:
            raise ValueError("a producer needs at least one base URL")
        self._bases = [b.rstrip("/") for b in bases]
        self._turn = 0
        self.run_id = run_id
        self.policy = policy or RetryPolicy()
        self.next_seq = next_seq
        self.max_batch_events = max_batch_events
        self.max_batch_bytes = max_batch_bytes
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._session = session
        self._own_session = session is None
        self._queue: deque[_Queued] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._sender: asyncio.Task[None] | None = None
        self._failed: ProducerError | None = None
        # What the fault tests report: attempts that were repeated, batches acknowledged.
        self.retries = 0
        self.batches = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if ev is None:
                await self.flush()
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop sending (what is still queued fails) and release the HTTP session."""
        await stopped(self._sender)
        self._sender = None
        self._fail_queued(ProducerError("closed", "the producer was closed"))
        if self._own_session and self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    # -- appending ------------------------------------------------------------------------

    def submit(self, chunk: Mapping[str, Any]) -> asyncio.Future[int]:
        """Queue one chunk; the future is its seq once it is durable."""
        if self._failed is not None:
            raise self._failed
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._queue.append(_Queued(orjson.dumps(chunk), future))
        self._idle.clear()
        self._wake.set()
        if self._sender is None:
            self._sender = asyncio.create_task(self._send_forever(), name=f"produce-{self.run_id}")
        return future

    async def send(self, *chunks: Mapping[str, Any]) -> Ack:
        """Append chunks (batched with whatever else is queued); returns once durable."""
        futures = [self.submit(c) for c in chunks]
        if not futures:
            raise ValueError("send needs at least one chunk")
        seqs = await asyncio.gather(*futures)
        return Ack(seqs[0], seqs[-1])

    async def flush(self) -> None:
        """Wait until everything submitted so far is durable (raises what refused it)."""
        await self._idle.wait()
        if self._failed is not None:
            raise self._failed

    async def close_run(self) -> Ack:
        """Flush, then close the run (idempotent, retried like an append)."""
        await self.flush()
        body = await self._retrying("POST", f"/v1/runs/{self.run_id}/close", b"")
        last = int(body["last_seq"])
        self.next_seq = last + 1
        return Ack(None, last)

    # -- the sender -----------------------------------------------------------------------

    async def _send_forever(self) -> None:
        while True:
            if not self._queue:
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            batch = self._take()
            try:
                first = await self._post_batch([q.body for q in batch])
            except ProducerError as exc:
                self._failed = exc
                for q in batch:
                    if not q.future.done():
                        q.future.set_exception(exc)
                self._fail_queued(exc)
                self._idle.set()
                return
            for offset, q in enumerate(batch):
                if not q.future.done():
                    q.future.set_result(first + offset)

    def _take(self) -> list[_Queued]:
        batch: list[_Queued] = []
        size = 0
        while self._queue and len(batch) < self.max_batch_events:
            nxt = self._queue[0]
            if batch and size + len(nxt.body) > self.max_batch_bytes:
                break
            batch.append(self._queue.popleft())
            size += len(nxt.body) + 1
        return batch

    def _fail_queued(self, exc: ProducerError) -> None:
        while self._queue:
            q = self._queue.popleft()
            if not q.future.done():
                q.future.set_exception(exc)
                # Nobody may be awaiting it (submit() without a wait): no "never retrieved".
                q.future.exception()
        self._idle.set()

    async def _post_batch(self, chunks: list[bytes]) -> int:
        """Post one batch at `next_seq` until it is stored; returns its first seq."""
        if self.next_seq is None:
            self.next_seq = await self._where_run_is() + 1
        expected = self.next_seq
        body = b'{"expected_seq":%d,"events":[%b]}' % (expected, b",".join(chunks))
        answer = await self._retrying("POST", f"/v1/runs/{self.run_id}/events", body)
        first, last = answer.get("first_seq"), int(answer["last_seq"])
        if first != expected or last != expected + len(chunks) - 1:
            raise ProducerError(
                "unexpected_answer", f"asked for seqs from {expected}, got {answer}"
            )
        self.next_seq = last + 1
        self.batches += 1
        return expected

    async def _where_run_is(self) -> int:
        """The run's last_seq (0 for a run that does not exist yet)."""
        try:
            run = await self._retrying("GET", f"/v1/runs/{self.run_id}", None)
        except ProducerError as exc:
            if exc.code == "run_not_found":
                return 0
            raise
        return int(run["last_seq"])

    async def _retrying(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        policy = self.policy
        started = time.monotonic()
        attempt = 0
        while True:
            try:
                return await self._request(method, path, body)
            except _Retry as why:
                waited = time.monotonic() - started
                if policy.give_up_after is not None and waited > policy.give_up_after:
                    raise ProducerError(
                        "unavailable", f"no answer for {waited:.1f}s; last: {why}"
                    ) from why
                self.retries += 1
                await asyncio.sleep(policy.delay(attempt, why.retry_after))
                attempt += 1

    @property
    def base_url(self) -> str:
        """The replica requests go to now."""
        return self._bases[self._turn % len(self._bases)]

    async def _request(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=self.policy.request_timeout)
        try:
            async with self._http().request(
                method, self.base_url + path, data=body, headers=self._headers, timeout=timeout
            ) as response:
                raw = await response.read()
                status = response.status
                retry_after = response.headers.get("Retry-After")
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            # Refused, reset, timed out or cut short: the batch may or may not be stored;
            # expected_seq makes sending it again safe either way, to any replica.
            self._turn += 1
            raise _Retry(f"{type(exc).__name__}: {exc}") from exc
        if status == 200:
            answer: dict[str, Any] = orjson.loads(raw)
            return answer
        if status in _RETRYABLE:
            raise _Retry(f"HTTP {status}", _seconds(retry_after))
        try:
            error = orjson.loads(raw)["error"]
            code, message = str(error["code"]), str(error["message"])
            last_seq = error.get("last_seq")
        except (orjson.JSONDecodeError, KeyError, TypeError):
            code, message, last_seq = "http_error", raw[:200].decode(errors="replace"), None
        raise ProducerError(code, message, status=status, last_seq=last_seq)


def _seconds(header: str | None) -> float | None:
    if header is None:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return None  # an HTTP date: treated as "soon", the backoff decides
