"""The service's one error tree.

Everything the service refuses is a `ReplayError` carrying a stable machine
code and an HTTP status; the HTTP edge turns it into
`{"error": {"code": ..., "message": ...}}` in one place. Database-driver
errors are translated in one place too, `agent_replay.log.faults` (`raise ... from
exc`), and never leak past the log.

    ReplayError
    ├── InvalidInput (4xx: the request itself is wrong)
    │   ├── InvalidJson            400 invalid_json
    │   ├── InvalidOffset          400 invalid_offset
    │   ├── InvalidCursor          400 invalid_cursor
    │   ├── CursorTooLarge         400 cursor_too_large  (+ max_runs: a thread cursor too long)
    │   ├── InvalidRunId           422 invalid_run_id
    │   ├── InvalidEvent           422 invalid_event
    │   │   └── NestedTooDeep      422 invalid_event     (nested past MAX_EVENT_DEPTH)
    │   ├── InvalidRequest         422 invalid_request
    │   │   ├── Unstorable         422 invalid_request   (a value the database refuses)
    │   │   └── InvalidBudget      422 invalid_budget    (a hosted run's budget)
    │   ├── InvalidExport          422 invalid_export    (+ line)
    │   │   ├── ExportChainBroken  422 export_chain_broken (+ line: the first line the chain fails)
    │   │   └── ExportNotSigned    422 export_not_signed (+ line: not signed by the key given)
    │   ├── InvalidKey             422 invalid_key       (not an Ed25519 key in PEM)
    │   ├── PayloadTooLarge        413 payload_too_large
    │   ├── UnsupportedMediaType   415 unsupported_media_type
    │   └── RequestTimeout         408 request_timeout   (a body stalled; the connection closes)
    ├── NotFound
    │   ├── RunNotFound            404 run_not_found
    │   └── ThreadNotFound         404 thread_not_found
    ├── Conflict (409: the request is fine, the log's state forbids it)
    │   ├── RunClosed              409 run_closed
    │   ├── RunConflict            409 run_conflict
    │   ├── SeqConflict            409 seq_conflict      (+ last_seq)
    │   ├── RunAltered             409 run_altered       (events no longer hash to the stored head)
    │   ├── OffsetOutOfRange       409 offset_out_of_range (+ last_seq)
    │   └── CursorNotInThread      409 cursor_not_in_thread (a thread cursor's run is not its)
    ├── Erased                     410 erased            (the run or thread was erased; a
    │                                                    tombstone is what remains)
    ├── Unauthorized               401 unauthorized      (+ WWW-Authenticate)
    │   ├── InvalidCredential      401 unauthorized      (a credential was sent)
    │   ├── TokenExpired           401 token_expired
    │   └── KeyInQuery             401 key_in_query      (an API key in ?token=)
    ├── Forbidden                  403 forbidden
    │   ├── OriginRefused          403 origin_refused    (a write from another site's page)
    │   └── HostRefused            403 host_refused      (open mode: Host not loopback or listed)
    ├── Unavailable                503 unavailable
    │   ├── Contended              503 unavailable       (concurrent writes collided; retry)
    │   ├── TooManyConnections     503 too_many_connections (`agent-replay serve`'s connection cap)
    │   └── Draining               503 draining          (a replica stopping: try another one)
    └── Durable Streams (/v1/stream, see agent_replay.durable)
        ├── InvalidHeader          400 invalid_header
        ├── InvalidParameter       400 invalid_parameter   (?live=, ?offset= twice, the name)
        ├── EmptyBody              400 empty_body
        ├── EmptyArray             400 empty_array
        ├── InvalidForkOffset      400 invalid_fork_offset
        ├── ProducerEpochSeq       400 producer_epoch_seq  (a new epoch must start at seq 0)
        ├── ProducerFenced         403 producer_fenced     (+ epoch)
        ├── StreamNotFound         404 stream_not_found
        ├── ForkSourceNotFound     404 fork_source_not_found
        ├── StreamGone             410 stream_gone
        ├── StreamConflict         409 stream_conflict
        ├── RunNotDeletable        409 run_not_deletable   (a run no PUT /v1/stream made)
        ├── ForkThreadConflict     409 fork_thread_conflict (a fork's body names another thread)
        ├── StreamClosed           409 stream_closed       (+ next_offset)
        ├── ContentTypeMismatch    409 content_type_mismatch
        ├── UnredactableStream     415 unredactable_stream (REPLAY_REDACT set: JSON streams only)
        ├── StreamSeqConflict      409 stream_seq_conflict
        ├── ProducerSeqGap         409 producer_seq_gap    (+ expected_seq, received_seq)
        └── ProducerRefused        409 producer_refused    (internal: a group-committed producer
                                                            append did not fit; answered again
                                                            by the guarded append, never sent)
"""

from __future__ import annotations

from typing import Any, ClassVar


class ReplayError(Exception):
    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, **self.extra}}


class InvalidInput(ReplayError):
    status = 422
    code = "invalid_request"


class InvalidJson(InvalidInput):
    status = 400
    code = "invalid_json"


class InvalidOffset(InvalidInput):
    status = 400
    code = "invalid_offset"


class InvalidCursor(InvalidInput):
    status = 400
    code = "invalid_cursor"


class CursorTooLarge(InvalidInput):
    """A thread stream's cursor naming more runs than one stream follows at once."""

    status = 400
    code = "cursor_too_large"


class InvalidTypes(InvalidInput):
    """A `?types=` filter that names no type or misplaces its `*`."""

    status = 400
    code = "invalid_types"


class InvalidRunId(InvalidInput):
    code = "invalid_run_id"


class InvalidEvent(InvalidInput):
    code = "invalid_event"


class NestedTooDeep(InvalidEvent):
    """An event nesting objects and arrays deeper than `agent_replay.log.chunks.MAX_EVENT_DEPTH`."""


class InvalidRequest(InvalidInput):
    code = "invalid_request"


class InvalidRedaction(InvalidInput):
    """A redaction rule that is unknown, malformed, unbounded or too costly to match."""

    code = "invalid_redaction"


class Unstorable(InvalidRequest):
    """A value the database refuses to store (its text says which and why)."""


class InvalidBudget(InvalidRequest):
    """A hosted run's budget (`X-Budget`, a start body's `budget`, an agent's) is malformed."""

    code = "invalid_budget"


class ForwardedHeadersTooLarge(InvalidInput):
    """The headers a hosted run's agent forwards to its upstream hold more than the bound
    (`agent_replay.agents.forwarding`); nothing is started."""

    status = 431
    code = "forwarded_headers_too_large"


class ForwardedCredential(InvalidInput):
    """A header forwarded to a hosted run's upstream holds this service's own credential
    (the request's key or token, or a configured API key); nothing is started."""

    status = 400
    code = "forwarded_credential"


class InvalidExport(InvalidInput):
    """An export file that cannot be imported; `line` is 1-based."""

    code = "invalid_export"

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}", line=line)
        self.line = line


class ExportChainBroken(InvalidExport):
    """An export file whose hash chain fails at `line`: an event changed, removed, moved or
    added since it was exported."""

    code = "export_chain_broken"


class ExportNotSigned(InvalidExport):
    """An export file an import was told to take only signed by a key, and which is not:
    unsigned, signed by another key, or a signature that does not verify."""

    code = "export_not_signed"


class InvalidKey(InvalidInput):
    """A key file that is not an Ed25519 key in PEM (a private key to sign, a public one to
    verify)."""

    code = "invalid_key"


class PayloadTooLarge(InvalidInput):
    status = 413
    code = "payload_too_large"


class UnsupportedMediaType(InvalidInput):
    status = 415
    code = "unsupported_media_type"


class UnknownFormat(InvalidInput):
    """An append's `?format=` names no format the route reads (`ag-ui`, `ai-sdk`)."""

    code = "unknown_format"


class RequestTimeout(InvalidInput):
    """The client stopped sending a request's body (agent_replay.api.connections)."""

    status = 408
    code = "request_timeout"


class NotFound(ReplayError):
    status = 404
    code = "not_found"


class RunNotFound(NotFound):
    code = "run_not_found"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run with id {run_id!r}")
        # What the HTTP edge looks up among the tombstones: an erased run is `Erased`.
        self.run_id = run_id


class ThreadNotFound(NotFound):
    code = "thread_not_found"

    def __init__(self, thread_id: str) -> None:
        super().__init__(f"no run belongs to thread {thread_id!r}")
        self.thread_id = thread_id


class Conflict(ReplayError):
    status = 409
    code = "conflict"


class RunClosed(Conflict):
    code = "run_closed"

    def __init__(self, run_id: str, last_seq: int) -> None:
        super().__init__(
            f"run {run_id!r} is closed; nothing more can be appended", last_seq=last_seq
        )


class RunConflict(Conflict):
    code = "run_conflict"


class SeqConflict(Conflict):
    code = "seq_conflict"

    def __init__(self, run_id: str, expected_seq: int, last_seq: int) -> None:
        super().__init__(
            f"run {run_id!r} is at seq {last_seq}; a batch expected to start at "
            f"{expected_seq} does not fit (retry with expected_seq={last_seq + 1})",
            last_seq=last_seq,
        )


class RedactionConflict(Conflict):
    """An append redacted from its run's held text (`agent_replay.ingest.held`) found the
    run moved on before it committed: nothing of it was stored. Redacted again from the
    run as it is now, a bounded number of times, then answered with this."""

    code = "redaction_conflict"

    def __init__(self, run_id: str, last_seq: int) -> None:
        super().__init__(
            f"run {run_id!r} kept changing while this append was redacted (it is at seq "
            f"{last_seq}); nothing was stored: send it again",
            last_seq=last_seq,
        )


class RunAltered(Conflict):
    """A run whose events no longer hash to the chain head the log stored with them: an
    export would carry a chain rebuilt over the altered events, so none is written."""

    code = "run_altered"

    def __init__(self, run_id: str) -> None:
        super().__init__(
            f"run {run_id!r} was altered in the database: its events do not hash to the chain "
            "head stored with them (agent-replay verify --run shows where); it is not exported",
            run_id=run_id,
        )


class OffsetOutOfRange(Conflict):
    code = "offset_out_of_range"


class CursorNotInThread(Conflict):
    """A thread stream's cursor names a run that is not (or no longer) one of the thread's."""

    code = "cursor_not_in_thread"


class ErasureUnsupported(Conflict):
    """Erasure asked of a log on Citus (docs/scale-out.md): the refusal of new runs on an
    erased thread is a trigger on `runs`, which Citus does not allow on a distributed
    table, so nothing is erased rather than leaving the thread open to new runs."""

    code = "erasure_unsupported"

    def __init__(self) -> None:
        super().__init__(
            "erasure is not supported on a log distributed on Citus (docs/scale-out.md); "
            "nothing was erased"
        )


class Erased(ReplayError):
    """The run, or every run of the thread, was erased (`DELETE /v1/threads/{id}`): only
    its tombstone remains, and nothing may be read of it, appended to it or made under
    its id or on its thread again."""

    status = 410
    code = "erased"


class Unauthorized(ReplayError):
    """No credential, or one this service does not know; `challenge` is the
    WWW-Authenticate value (RFC 6750)."""

    status = 401
    code = "unauthorized"
    challenge: ClassVar[str] = 'Bearer realm="agent-replay"'


class InvalidCredential(Unauthorized):
    challenge = 'Bearer realm="agent-replay", error="invalid_token"'


class TokenExpired(Unauthorized):
    code = "token_expired"
    challenge = (
        'Bearer realm="agent-replay", error="invalid_token", '
        'error_description="the token has expired"'
    )


class KeyInQuery(Unauthorized):
    """An API key sent in `?token=`, where only tokens may come: refused, not used."""

    code = "key_in_query"
    challenge = (
        'Bearer realm="agent-replay", error="invalid_request", '
        'error_description="API keys go in the Authorization header"'
    )


class Forbidden(ReplayError):
    """A valid credential outside its scope, thread or run. Said the same way
    whether or not the run exists."""

    status = 403
    code = "forbidden"


class OriginRefused(Forbidden):
    """A state-changing request from a page of an origin neither the service's own nor
    listed in REPLAY_CORS_ORIGINS (browsers send `Origin`; other clients do not)."""

    code = "origin_refused"


class HostRefused(Forbidden):
    """Open mode only: a `Host` that is no loopback name and not in REPLAY_ALLOWED_HOSTS
    (a page on a name rebound to this machine's address)."""

    code = "host_refused"


class Unavailable(ReplayError):
    status = 503
    code = "unavailable"


class Contended(Unavailable):
    """Concurrent writers collided (a deadlock, a serialization failure): safe to retry."""


class TooManyConnections(Unavailable):
    """`agent-replay serve` holds as many connections as it may (agent_replay.api.connections)."""

    code = "too_many_connections"


class Draining(Unavailable):
    """This process is draining before it stops (SIGTERM): it starts no run and opens no
    stream; another replica does (the shipped nginx configuration retries there)."""

    code = "draining"


# -- Durable Streams (the protocol's statuses are fixed by PROTOCOL.md) -----


class InvalidHeader(InvalidInput):
    status = 400
    code = "invalid_header"


class InvalidParameter(InvalidInput):
    status = 400
    code = "invalid_parameter"


class EmptyBody(InvalidInput):
    status = 400
    code = "empty_body"


class EmptyArray(InvalidInput):
    status = 400
    code = "empty_array"


class InvalidForkOffset(InvalidInput):
    status = 400
    code = "invalid_fork_offset"


class ProducerEpochSeq(InvalidInput):
    status = 400
    code = "producer_epoch_seq"


class ProducerFenced(ReplayError):
    """A stale producer epoch (a zombie): `epoch` is the current one."""

    status = 403
    code = "producer_fenced"

    def __init__(self, epoch: int) -> None:
        super().__init__(f"producer epoch is stale; the current epoch is {epoch}", epoch=epoch)
        self.epoch = epoch


class StreamNotFound(NotFound):
    code = "stream_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no stream {name!r}")
        # A stream named by its run's id (the default) is that run: erased, it is `Erased`.
        self.run_id = name


class ForkSourceNotFound(NotFound):
    code = "fork_source_not_found"

    def __init__(self, name: str) -> None:
        super().__init__(f"no source stream {name!r} to fork from")


class StreamGone(ReplayError):
    status = 410
    code = "stream_gone"

    def __init__(self, name: str) -> None:
        super().__init__(f"stream {name!r} was deleted (its forks still read it)")


class StreamConflict(Conflict):
    code = "stream_conflict"


class RunNotDeletable(Conflict):
    """DELETE /v1/stream of a run no PUT /v1/stream made (the run API's, a hosted run's):
    the run API deletes nothing, so neither does this."""

    code = "run_not_deletable"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"{name!r} is a run not made by PUT /v1/stream; only such streams can be deleted"
        )


class ForkThreadConflict(Conflict):
    """A fork's body starts a run on another thread than its source's: a fork stays on
    its source's thread, as the run API's fork does."""

    code = "fork_thread_conflict"


class StreamClosed(Conflict):
    code = "stream_closed"

    def __init__(self, name: str, last_seq: int) -> None:
        super().__init__(f"stream {name!r} is closed; nothing more can be appended")
        self.last_seq = last_seq


class ContentTypeMismatch(Conflict):
    code = "content_type_mismatch"


class UnredactableStream(UnsupportedMediaType):
    """With redaction rules (`REPLAY_REDACT`), a Durable Stream of any type but JSON: its
    bytes are opaque, so no rule could be applied to them."""

    code = "unredactable_stream"


class StreamSeqConflict(Conflict):
    code = "stream_seq_conflict"


class ProducerSeqGap(Conflict):
    code = "producer_seq_gap"

    def __init__(self, expected: int, received: int) -> None:
        super().__init__(
            f"producer seq {received} skips ahead; expected {expected}",
            expected_seq=expected,
            received_seq=received,
        )
        self.expected = expected
        self.received = received


class ProducerRefused(Conflict):
    """A producer's append in a group commit that its stored state did not admit (or that
    might have met a concurrent change): nothing was written, and the Durable Streams layer
    answers it again through the guarded append, which tells duplicate, gap or fence."""

    code = "producer_refused"
