"""The protocol's rules over the log: what each request does and answers.

Every operation returns a `Reply` (status, protocol headers, body) or, for
SSE, an async iterator of frames; the HTTP edge only copies them out. Errors
are the service's `ReplayError`s; `error_headers` gives the protocol headers
a refusal carries (`Stream-Closed`, `Producer-Epoch`, ...).
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter

from agent_replay.durable import bodies, headers, sse
from agent_replay.durable.cursor import response_cursor
from agent_replay.durable.known import KnownStreams, media_type
from agent_replay.durable.offsets import NOW, Position, format_offset, parse_offset
from agent_replay.durable.readahead import ReadAhead
from agent_replay.errors import (
    ContentTypeMismatch,
    EmptyBody,
    ForkSourceNotFound,
    InvalidForkOffset,
    InvalidHeader,
    InvalidParameter,
    PayloadTooLarge,
    ProducerFenced,
    ProducerRefused,
    ProducerSeqGap,
    ReplayError,
    RunClosed,
    RunNotFound,
    StreamClosed,
    StreamConflict,
    StreamGone,
    StreamNotFound,
    Unavailable,
    UnredactableStream,
)
from agent_replay.ingest import Rules, record, redact_locked
from agent_replay.log.chunks import dumps
from agent_replay.log.streams import NewStream, Producer, Redact, StreamState, StreamStore
from agent_replay.log.values import Held, Redaction, RunState, StoredChunk
from agent_replay.stream import Hub
from agent_replay.stream.channel import Channel
from agent_replay.tasks import wait_set

PREFIX = "/v1/stream/"


@dataclass(frozen=True, slots=True)
class Limits:
    max_body_bytes: int = 8 << 20
    max_messages: int = 10_000
    read_max_messages: int = 10_000
    read_max_bytes: int = 4 << 20
    long_poll_seconds: float = 20.0
    # How long a long-poll's channel outlives the poll (see `Streams._poll`).
    poll_linger_seconds: float = 2.0
    sse_seconds: float = 60.0
    heartbeat_seconds: float = 15.0
    # `private` when the service needs keys: a shared cache must not serve one
    # caller's stream to another.
    private: bool = False


@dataclass(slots=True)
class Reply:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""


@dataclass(slots=True)
class Live:
    """An SSE response: its headers, then its frames."""

    headers: dict[str, str]
    frames: AsyncIterator[bytes]


def error_headers(exc: ReplayError) -> dict[str, str]:
    if isinstance(exc, StreamClosed):
        return {"Stream-Closed": "true", "Stream-Next-Offset": format_offset(exc.last_seq)}
    if isinstance(exc, ProducerFenced):
        return {"Producer-Epoch": str(exc.epoch)}
    if isinstance(exc, ProducerSeqGap):
        return {
            "Producer-Expected-Seq": str(exc.expected),
            "Producer-Received-Seq": str(exc.received),
        }
    return {}


def source_name(path: str) -> str:
    """`Stream-Forked-From` is the source's URL path; a bare name is taken as is."""
    return path[len(PREFIX) :] if path.startswith(PREFIX) else path.lstrip("/")


def _json_mode(state: StreamState) -> bool:
    return bodies.is_json(state.content_type)


def _tail_headers(state: StreamState, next_seq: int) -> dict[str, str]:
    out = {"Content-Type": state.content_type, "Stream-Next-Offset": format_offset(next_seq)}
    if state.closed and next_seq >= state.last_seq:
        out["Stream-Closed"] = "true"
    return out


_TYPE = attrgetter("type")


class Streams:
    """One per process: the protocol over the log's `StreamStore` and the stream hub."""

    def __init__(self, store: StreamStore, hub: Hub, limits: Limits) -> None:
        self.store = store
        self.log = store.log
        self.hub = hub
        self.limits = limits
        self.ahead = ReadAhead(self._read_json)
        self.known = KnownStreams()
        # REPLAY_REDACT's rules for JSON streams' messages (set by the app; None: none).
        self.redact: Rules | None = None

    async def close(self) -> None:
        await self.ahead.close()

    async def _read_json(self, state: StreamState, after: int) -> tuple[int, int, str]:
        limits = self.limits
        return await self.store.read_json(
            state, after, state.last_seq, limits.read_max_messages, limits.read_max_bytes
        )

    async def _existing(self, name: str, *, touch: bool) -> StreamState:
        state = await self.store.lookup(name, touch=touch)
        if state is None:
            raise StreamNotFound(name)
        return state

    async def _current(self, name: str) -> StreamState:
        """The stream as a read finds it: a remembered one from its run's row alone,
        any other looked up (sliding its TTL) and remembered."""
        known = self.known.get(name)
        if known is not None:
            state = await self._still(known)
            if state is not None:
                return state
            self.known.forget(name)
        state = await self._existing(name, touch=True)
        self.known.remember(state)
        return state

    async def _still(self, state: StreamState) -> StreamState | None:
        """`state` at its run's tail now, if the run is still open and the same life;
        None when the answer needs a lookup (closed, deleted, made again)."""
        run = (await self.log.read_states([state.run_id])).get(state.run_id)
        if run is None or run.closed or run.created_at != state.created_at:
            return None
        return _upto(state, run.last_seq)

    # -- PUT ------------------------------------------------------------------

    async def create(self, name: str, h: Mapping[str, str], body: bytes, location: str) -> Reply:
        self._check_body(body)
        headers.check_storable(h)
        fork = headers.fork(h)
        requested_type = headers.content_type(h)
        expiry = headers.expiry(h)
        closed = headers.closed_flag(h)
        chunks: list[StoredChunk] = []
        new: NewStream
        if fork is None:
            content_type = requested_type or headers.DEFAULT_TYPE
            new = NewStream(name, content_type, expiry.ttl_seconds, expiry.expires_at, closed)
        else:
            new, chunks = await self._fork(name, fork, requested_type, expiry, closed)
            content_type = new.content_type
        self._refuse_opaque(content_type)
        if body:
            if bodies.is_json(content_type):
                chunks += bodies.json_messages(
                    body, allow_empty=True, max_messages=self.limits.max_messages
                )
            else:
                chunks.append(bodies.bytes_chunk(body))
        counts: Counter[str] = Counter()
        redact = self._redaction(new.content_type, counts)
        state, created = await self.store.create(new, chunks, redact)
        if created:
            record(counts)  # committed, with the run's counts
        self.known.remember(state)
        reply = Reply(201 if created else 200, _tail_headers(state, state.last_seq))
        if created:
            reply.headers["Location"] = location
        return reply

    async def _fork(
        self,
        name: str,
        fork: headers.ForkRequest,
        requested_type: str | None,
        expiry: headers.Expiry,
        closed: bool,
    ) -> tuple[NewStream, list[StoredChunk]]:
        source_path = source_name(fork.source)
        try:
            source = await self.store.lookup(source_path, touch=False)
        except StreamGone:
            raise StreamConflict(
                f"source stream {source_path!r} was deleted; it cannot be forked"
            ) from None
        if source is None:
            raise ForkSourceNotFound(source_path)
        if requested_type is not None and (
            media_type(requested_type) != media_type(source.content_type)
        ):
            raise ContentTypeMismatch(
                f"a fork has its source's content type ({source.content_type})"
            )
        anchor = source.last_seq
        if fork.offset is not None:
            position = parse_offset(fork.offset)
            assert position != NOW  # the header's format admits offsets only
            anchor = position
        if anchor > source.last_seq:
            raise InvalidForkOffset(
                f"Stream-Fork-Offset {fork.offset} is beyond the source's tail "
                f"({format_offset(source.last_seq)})"
            )
        fork_seq = anchor
        chunks: list[StoredChunk] = []
        if fork.sub_offset:
            if bodies.is_json(source.content_type):
                fork_seq = anchor + fork.sub_offset
                if fork_seq > source.last_seq:
                    raise InvalidForkOffset(
                        f"Stream-Fork-Sub-Offset {fork.sub_offset} is past the last message"
                    )
            else:
                text = await self.store.chunk_at(source.run_id, anchor + 1)
                data = b"" if text is None else bodies.chunk_bytes(text)
                if text is None or fork.sub_offset > len(data):
                    raise InvalidForkOffset(
                        f"Stream-Fork-Sub-Offset {fork.sub_offset} is past the next append's end"
                    )
                if fork.sub_offset == len(data):
                    fork_seq = anchor + 1
                else:
                    # The part of the append the fork keeps becomes its own first event.
                    chunks.append(bodies.bytes_chunk(data[: fork.sub_offset]))
        ttl, expires_at = expiry.ttl_seconds, expiry.expires_at
        if ttl is None and expires_at is None:
            ttl, expires_at = source.ttl_seconds, source.expires_at
        spec = dumps([source_path, fork.offset, fork.sub_offset])
        new = NewStream(
            name,
            requested_type or source.content_type,
            ttl,
            expires_at,
            closed,
            fork_spec=spec,
            fork_source_run=source.run_id,
            fork_seq=fork_seq,
        )
        return new, chunks

    async def fork_run(self, source: str, run_id: str, at_seq: int | None) -> tuple[str, int, bool]:
        """The run API's fork ("retry from here"): run `run_id` shares `source`'s events up
        to `at_seq` (default: all) and goes on on its own. The same fork as a `PUT` of
        `/v1/stream/{run_id}` with `Stream-Forked-From: /v1/stream/{source}` and that offset.
        Returns (run_id, fork_seq, created)."""
        offset = None if at_seq is None else format_offset(at_seq)
        request = headers.ForkRequest(PREFIX + source, offset, 0)
        new, _ = await self._fork(run_id, request, None, headers.Expiry(None, None), False)
        # A run of the run API, which deletes nothing: DELETE /v1/stream may not either.
        state, created = await self.store.create(replace(new, deletable=False), [])
        if state.fork_seq is None:
            raise StreamConflict(f"run {run_id!r} already exists and is no fork of {source!r}")
        return state.run_id, state.fork_seq, created

    def _check_body(self, body: bytes) -> None:
        if len(body) > self.limits.max_body_bytes:
            raise PayloadTooLarge(f"the body is over {self.limits.max_body_bytes} bytes")

    # -- POST -----------------------------------------------------------------

    async def append(self, name: str, h: Mapping[str, str], body: bytes) -> Reply:
        self._check_body(body)
        headers.check_storable(h)
        close = headers.closed_flag(h)
        producer = headers.producer(h)
        stream_seq = headers.stream_seq(h)
        if not body and not close:
            raise EmptyBody("an append needs a body (or Stream-Closed: true to close)")
        known = self.known.get(name)
        if known is not None:
            reply = await self._append_remembered(known, h, body, close, producer, stream_seq)
            if reply is not None:
                return reply
            self.known.forget(name)
        state = await self._existing(name, touch=True)
        self.known.remember(state)
        if producer is not None or stream_seq is not None or self.redact is not None:
            return await self._append_guarded(state, h, body, close, producer, stream_seq)
        chunks = self._body_chunks(name, state, h, body, producer)
        if not chunks:
            if state.closed:
                return self._appended(state.last_seq, True, False, None, None)
            try:
                run = await self.log.close_run(state.run_id)
            except RunNotFound:
                raise StreamNotFound(name) from None
            return self._appended(run.last_seq, True, False, None, None)
        if state.last_seq == (state.fork_seq or 0) and any(c.type == "RUN_STARTED" for c in chunks):
            await self.store.adopt_thread(state.run_id, chunks)
        try:
            result = await self.log.append(state.run_id, chunks, close=close, create=False)
        except RunClosed as exc:
            raise StreamClosed(name, int(exc.extra.get("last_seq", state.last_seq))) from None
        except RunNotFound:
            raise StreamNotFound(name) from None
        return self._appended(result.last_seq, close, False, None, None)

    def _body_chunks(
        self,
        name: str,
        state: StreamState,
        h: Mapping[str, str],
        body: bytes,
        producer: Producer | None,
    ) -> list[StoredChunk]:
        """An append's body as events, checked against the stream (none for a bare close,
        or for a producer's retry of a closed stream, which the guarded append answers);
        as sent: with rules set, the guarded append redacts them (`_redaction`)."""
        if not body or (state.closed and producer is not None):
            return []
        if state.closed:
            raise StreamClosed(name, state.last_seq)
        requested = headers.content_type(h)
        if requested is None:
            raise InvalidHeader("an append with a body needs a Content-Type")
        if media_type(requested) != media_type(state.content_type):
            raise ContentTypeMismatch(f"stream {name!r} is {state.content_type}, not {requested}")
        if _json_mode(state):
            return bodies.json_messages(
                body, allow_empty=False, max_messages=self.limits.max_messages
            )
        self._refuse_opaque(state.content_type)
        return [bodies.bytes_chunk(body)]

    def _redaction(self, content_type: str, counts: Counter[str]) -> Redact | None:
        """With rules set, a JSON stream's appends (and a PUT's content) are redacted from
        its run's hold, as pushed appends are: what a message's end may still complete is
        held with the run, by the append's own statement, for the stream's next append on
        any replica. `counts`: becomes the matches of the last redaction made (a
        transaction tried again redacts again), for /metrics once it committed."""
        rules = self.redact
        if rules is None or not bodies.is_json(content_type):
            return None

        def redact(
            held: Held, chunks: Sequence[StoredChunk], close: bool
        ) -> tuple[Sequence[StoredChunk], Redaction]:
            out, redaction = redact_locked(rules, held, chunks, close)
            counts.clear()
            counts.update(redaction.counts)
            return out, redaction

        return redact

    def _refuse_opaque(self, content_type: str) -> None:
        """With redaction rules, only JSON streams: a byte stream's content is opaque (any
        encoding, cut anywhere), so storing it would let text past every rule unmatched."""
        if self.redact is not None and not bodies.is_json(content_type):
            raise UnredactableStream(
                f"redaction rules are set (REPLAY_REDACT) and a {content_type[:80]} stream "
                "holds bytes no rule can be applied to: create the stream as "
                "application/json, whose messages are redacted"
            )

    async def _append_guarded(
        self,
        state: StreamState,
        h: Mapping[str, str],
        body: bytes,
        close: bool,
        producer: Producer | None,
        stream_seq: str | None,
    ) -> Reply:
        chunks = self._body_chunks(state.name, state, h, body, producer)
        counts: Counter[str] = Counter()
        written = await self.store.append_guarded(
            state,
            chunks,
            close=close,
            producer=producer,
            stream_seq=stream_seq,
            redact=self._redaction(state.content_type, counts),
        )
        if not written.duplicate:
            record(counts)  # committed, with the run's counts
        reply = self._appended(
            written.last_seq, written.closed, written.duplicate, producer, written.producer_seq
        )
        if not chunks:
            reply.status = 204  # close-only: 204, first time or retry
        return reply

    async def _append_remembered(
        self,
        state: StreamState,
        h: Mapping[str, str],
        body: bytes,
        close: bool,
        producer: Producer | None,
        stream_seq: str | None,
    ) -> Reply | None:
        """An append to a stream this process remembers, without looking it up.

        None when it did not append and the answer needs the stream as it is now
        (the caller looks it up): any refusal, a first RUN_STARTED, a bare close.
        Never None once it may have appended.
        """
        redacted = self.redact is not None
        if body and stream_seq is None and (producer is None or not close) and not redacted:
            # Plain, or an idempotent producer's next append: it commits with the group.
            reply = await self._append_grouped(state, h, body, close, producer)
            if reply is not None or producer is None:
                return reply
        if producer is None and stream_seq is None and not redacted:
            return None
        # With rules set every append takes the guarded path: it reads the run's hold
        # under the run's lock, after a producer's retry is recognized.
        # The guarded append re-reads the stream under its run's lock; any refusal
        # is answered again from the stream as it is now.
        try:
            return await self._append_guarded(state, h, body, close, producer, stream_seq)
        except Unavailable:
            raise  # it may have committed: the producer's retry finds out
        except ReplayError:
            return None

    async def _append_grouped(
        self,
        state: StreamState,
        h: Mapping[str, str],
        body: bytes,
        close: bool,
        producer: Producer | None,
    ) -> Reply | None:
        """Through the group commit, to the run of `state`'s life only (and, for a
        producer, only what its stored state admits); None when refused."""
        try:
            chunks = self._body_chunks(state.name, state, h, body, producer)
        except ReplayError:
            return None
        if "RUN_STARTED" in map(_TYPE, chunks):
            return None  # the run takes its thread: the lookup path does that
        try:
            result = await self.log.append(
                state.run_id,
                chunks,
                close=close,
                create=False,
                created_at=state.created_at,
                producer=None if producer is None else producer.key_parts(),
            )
        except (RunClosed, RunNotFound, ProducerRefused):
            return None  # refused by the statement, so nothing was appended
        return self._appended(
            result.last_seq, close, False, producer, None if producer is None else producer.seq
        )

    @staticmethod
    def _appended(
        last_seq: int,
        closed: bool,
        duplicate: bool,
        producer: Producer | None,
        producer_seq: int | None,
    ) -> Reply:
        out = {"Stream-Next-Offset": format_offset(last_seq)}
        if closed:
            out["Stream-Closed"] = "true"
        status = 204
        if producer is not None:
            out["Producer-Epoch"] = str(producer.epoch)
            out["Producer-Seq"] = str(producer.seq if producer_seq is None else producer_seq)
            status = 204 if duplicate else 200
        return Reply(status, out)

    # -- HEAD, DELETE -----------------------------------------------------------

    async def head(self, name: str) -> Reply:
        state = await self._existing(name, touch=False)
        out = _tail_headers(state, state.last_seq)
        out["Cache-Control"] = "no-store"
        if state.ttl_seconds is not None:
            out["Stream-TTL"] = str(state.ttl_seconds)
        if state.expires_at is not None:
            out["Stream-Expires-At"] = headers.format_time(state.expires_at)
        out["ETag"] = self._etag(state, "-1", state.last_seq, state.closed)
        return Reply(200, out)

    async def delete(self, name: str) -> Reply:
        self.known.forget(name)
        await self.store.delete(name)
        return Reply(204)

    # -- GET --------------------------------------------------------------------

    def _etag(self, state: StreamState, start: str, end: int, closed: bool) -> str:
        tag = base64.urlsafe_b64encode(state.run_id.encode()).decode().rstrip("=")
        return f'"{tag}:{start}:{format_offset(end)}{":c" if closed else ""}"'

    def _cache_control(self) -> str:
        scope = "private" if self.limits.private else "public"
        return f"{scope}, max-age=60, stale-while-revalidate=300"

    async def read(
        self,
        name: str,
        offset: str | None,
        live: str | None,
        cursor: str | None,
        if_none_match: str | None,
    ) -> Reply | Live:
        if live not in (None, "long-poll", "sse"):
            raise InvalidParameter(f"live={live[:40]!r} is not long-poll or sse")
        if live is not None and offset is None:
            raise InvalidParameter(f"live={live} needs an offset (-1 for the start)")
        if live is not None:
            self.hub.refuse_if_draining()
        position = parse_offset("-1" if offset is None else offset)
        if live == "long-poll":
            return await self._poll(name, position, offset or "-1", cursor, if_none_match)
        state = await self._current(name)
        if live == "sse":
            return self._sse(state, position, cursor)
        if position == NOW and live is None:
            out = _tail_headers(state, state.last_seq)
            out["Stream-Up-To-Date"] = "true"
            out["Cache-Control"] = "no-store"
            return Reply(200, out, b"[]" if _json_mode(state) else b"")
        after = state.last_seq if position == NOW else min(position, state.last_seq)
        return await self._catch_up(state, after, offset or "-1", if_none_match)

    async def _rows(self, state: StreamState, after: int) -> list[tuple[int, str]]:
        rows = await self.store.read(state, after, state.last_seq, self.limits.read_max_messages)
        return self._within_budget(rows)

    def _within_budget(self, rows: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """The first rows of one response: at most the read limits' messages and (about)
        bytes, never none."""
        rows = rows[: self.limits.read_max_messages]
        budget = self.limits.read_max_bytes
        for i, (_, text) in enumerate(rows):
            budget -= len(text)
            if budget < 0 and i > 0:
                return rows[:i]
        return rows

    async def _content(self, state: StreamState, after: int) -> tuple[int, bytes]:
        """What follows `after` as a response body, and the seq it ends at."""
        if after >= state.last_seq:
            return after, b"[]" if _json_mode(state) else b""
        if _json_mode(state):
            end, text = await self.ahead.page(state, after)
            return end, b"[" + text.encode("utf-8", "surrogatepass") + b"]"
        rows = await self._rows(state, after)
        return (rows[-1][0] if rows else after), bodies.body_of(rows, False)

    async def _catch_up(
        self, state: StreamState, after: int, start: str, if_none_match: str | None
    ) -> Reply:
        end, body = await self._content(state, after)
        up_to_date = end >= state.last_seq
        return self._page(state, start, end, body, up_to_date, state.closed, if_none_match)

    def _page(
        self,
        state: StreamState,
        start: str,
        end: int,
        body: bytes,
        up_to_date: bool,
        closed: bool,
        if_none_match: str | None = None,
    ) -> Reply:
        """A catch-up answer: messages up to `end`; `closed` counts only at the tail."""
        closed = closed and up_to_date
        out = {"Content-Type": state.content_type, "Stream-Next-Offset": format_offset(end)}
        if up_to_date:
            out["Stream-Up-To-Date"] = "true"
        if closed:
            out["Stream-Closed"] = "true"
        etag = self._etag(state, start, end, closed)
        out["ETag"] = etag
        out["Cache-Control"] = self._cache_control()
        if if_none_match is not None and if_none_match.strip() == etag:
            return Reply(304, {"ETag": etag, "Cache-Control": out["Cache-Control"]})
        return Reply(200, out, body)

    async def _poll(
        self,
        name: str,
        position: Position,
        start: str,
        cursor: str | None,
        if_none_match: str | None,
    ) -> Reply:
        """`live=long-poll`: subscribed first, then one read of the run's tail, so no
        commit falls between the two. A remembered stream needs no lookup, and its
        channel lingers between a follower's polls: what was committed while the
        follower was away is answered from the buffer, with no read of its own."""
        linger = self.limits.poll_linger_seconds
        known = self.known.get(name)
        if known is not None:
            with self.hub.subscribe(known.run_id, linger=linger, life=known.created_at) as sub:
                now = await self._still(known)
                if now is not None:
                    return await self._poll_on(
                        sub.channel, now, position, start, cursor, if_none_match
                    )
            self.known.forget(name)
        state = await self._existing(name, touch=True)
        self.known.remember(state)
        if state.closed:
            return await self._poll_on(None, state, position, start, cursor, if_none_match)
        with self.hub.subscribe(state.run_id, linger=linger, life=state.created_at) as sub:
            now = await self._still(state) or await self._existing(name, touch=False)
            return await self._poll_on(sub.channel, now, position, start, cursor, if_none_match)

    async def _poll_on(
        self,
        channel: Channel | None,
        now: StreamState,
        position: Position,
        start: str,
        cursor: str | None,
        if_none_match: str | None,
    ) -> Reply:
        """A long-poll on `channel` (subscribed before `now` was read; None for a closed stream)."""
        after = now.last_seq if position == NOW else min(position, now.last_seq)
        if channel is not None:
            channel.anchor(RunState(now.last_seq, now.closed))
        if after < now.last_seq:
            # Already behind: a catch-up, from the buffer when it holds what follows.
            if channel is not None and if_none_match is None:
                rows = channel.rows_after(after)
                if rows:
                    return self._poll_rows(now, after, start, rows, channel, cursor)
            reply = await self._catch_up(now, after, start, if_none_match)
            reply.headers["Stream-Cursor"] = response_cursor(cursor)
            return reply
        if channel is None or now.closed:
            return self._poll_empty(now, after, cursor)
        deadline = time.monotonic() + self.limits.long_poll_seconds
        while True:
            advanced = channel.advanced
            if now.last_seq > after:
                reply = await self._catch_up(now, after, format_offset(after), None)
                reply.headers["Stream-Cursor"] = response_cursor(cursor)
                return reply
            # Woken by a commit: the channel has read what it added (one read for
            # every follower of the run), so the answer needs no read of its own.
            rows = channel.rows_after(after)
            if rows:
                return self._poll_rows(now, after, format_offset(after), rows, channel, cursor)
            if (channel.head or 0) > after:
                # Past what the channel still buffers: read the log.
                now = _upto(now, channel.head or after)
                continue
            if now.closed or (channel.complete and (channel.head or 0) <= after):
                return self._poll_empty(replace(now, closed=True), after, cursor)
            left = deadline - time.monotonic()
            if left <= 0 or self.hub.draining:  # draining: the next poll goes elsewhere
                return self._poll_empty(now, after, cursor)
            await wait_set(advanced, left)

    def _poll_rows(
        self,
        state: StreamState,
        after: int,
        start: str,
        rows: list[tuple[int, str]],
        channel: Channel,
        cursor: str | None,
    ) -> Reply:
        """A long-poll's answer from the rows its channel read, as `_catch_up` answers."""
        rows = self._within_budget(rows)
        end = rows[-1][0]
        tail = max(channel.head or end, state.last_seq)
        up_to_date = end >= tail
        closed = channel.complete or (state.closed and end >= state.last_seq)
        body = bodies.body_of(rows, _json_mode(state))
        reply = self._page(state, start, end, body, up_to_date, closed)
        reply.headers["Stream-Cursor"] = response_cursor(cursor)
        return reply

    @staticmethod
    def _poll_empty(state: StreamState, after: int, cursor: str | None) -> Reply:
        out = {"Stream-Next-Offset": format_offset(after), "Stream-Up-To-Date": "true"}
        if state.closed:
            out["Stream-Closed"] = "true"
        else:
            out["Stream-Cursor"] = response_cursor(cursor)
        return Reply(204, out)

    # -- SSE --------------------------------------------------------------------

    def _sse(self, state: StreamState, position: int | str, cursor: str | None) -> Live:
        binary = not bodies.is_text(state.content_type)
        out = {
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
        if binary:
            out["Stream-SSE-Data-Encoding"] = "base64"
        after = state.last_seq if position == NOW else min(int(position), state.last_seq)
        return Live(out, self._frames(state, after, cursor, binary))

    def _payload(self, state: StreamState, rows: list[tuple[int, str]], binary: bool) -> str:
        if _json_mode(state):
            return "[" + ",".join(text for _, text in rows) + "]"
        data = b"".join(bodies.chunk_bytes(text) for _, text in rows)
        if binary:
            return sse.base64_payload(data)
        return data.decode("utf-8", "replace")

    async def _sse_catch_up(self, state: StreamState, after: int, binary: bool) -> tuple[str, int]:
        """A catch-up page from the log for one SSE data event: (payload, its last seq)."""
        if _json_mode(state):
            end, text = await self.ahead.page(state, after)
            return "[" + text + "]", end
        rows = await self._rows(state, after)
        return self._payload(state, rows, binary), rows[-1][0]

    async def _frames(
        self, state: StreamState, after: int, cursor: str | None, binary: bool
    ) -> AsyncIterator[bytes]:
        limits = self.limits
        ends_at = time.monotonic() + limits.sse_seconds
        sent_control = False
        with self.hub.subscribe(state.run_id) as sub:
            channel = sub.channel
            # Read after subscribing, so no commit can fall between the two.
            state = await self._still(state) or await self._existing(state.name, touch=False)
            known, closed = state.last_seq, state.closed
            channel.anchor(RunState(known, closed))
            while True:
                advanced = channel.advanced
                payload: str | None = None
                if after < known:
                    payload, end = await self._sse_catch_up(_upto(state, known), after, binary)
                else:
                    rows = channel.rows_after(after)
                    if not rows and (channel.head or 0) > after:
                        known = channel.head or known
                        continue
                    if channel.complete and channel.head is not None and channel.head <= after:
                        closed = True
                    if rows:
                        payload, end = self._payload(state, rows, binary), rows[-1][0]
                if payload is not None:
                    after = end
                    known = max(known, after)
                    if channel.complete and channel.head == after:
                        closed = True
                    at_tail = after >= known and after >= (channel.head or 0)
                    frame = sse.data_event(payload)
                    frame += sse.control_event(
                        format_offset(after),
                        cursor=response_cursor(cursor),
                        up_to_date=at_tail,
                        closed=closed and at_tail,
                    )
                    yield frame.encode("utf-8", "surrogatepass")
                    sent_control = True
                    if closed and at_tail:
                        return
                    continue
                if closed or not sent_control:
                    yield sse.control_event(
                        format_offset(after),
                        cursor=response_cursor(cursor),
                        up_to_date=True,
                        closed=closed,
                    ).encode()
                    sent_control = True
                    if closed:
                        return
                left = ends_at - time.monotonic()
                if left <= 0 or self.hub.draining:  # draining: the client resumes elsewhere
                    return
                if not await wait_set(advanced, min(left, limits.heartbeat_seconds)):
                    sent_control = False  # a control event as the heartbeat


def _upto(state: StreamState, last_seq: int) -> StreamState:
    return state if last_seq == state.last_seq else replace(state, last_seq=last_seq)
