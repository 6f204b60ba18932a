"""Pydantic shapes for the OpenAPI document (routes answer with raw JSON)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agent_replay.log import MAX_SEQ


class ErrorBody(BaseModel):
    code: str = Field(examples=["seq_conflict"])
    message: str


class ErrorOut(BaseModel):
    error: ErrorBody


class RunCreate(BaseModel):
    thread_id: str | None = Field(default=None, max_length=256)
    metadata: dict[str, Any] | None = None


class OnDisconnectOut(BaseModel):
    policy: str = Field(description="continue, cancel or cancel_after")
    grace_seconds: float | None = Field(default=None, description="cancel_after only")
    reader_left_at: str | None = Field(description="when its last reader left (null: never)")


class RunOut(BaseModel):
    run_id: str
    thread_id: str | None
    agent: str | None
    status: str = Field(description="running, finished, error, cancelled or interrupted")
    last_seq: int
    closed: bool
    created_at: str
    updated_at: str
    closed_at: str | None
    metadata: dict[str, Any]
    error: str | None = Field(description="the message of the run's last RUN_ERROR")
    error_code: str | None = Field(
        description="its code: cancelled (POST .../cancel), abandoned (its disconnect policy: "
        "nobody read it), interrupted (its driver stopped), upstream_error, or a producer's own"
    )
    on_disconnect: OnDisconnectOut | None = Field(
        default=None, description="a hosted run's disconnect policy (null for other runs)"
    )


class AppendIn(BaseModel):
    events: list[dict[str, Any]] = Field(description="AG-UI chunks, each with a string 'type'")
    expected_seq: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQ,
        description="The seq the first event must get (safe retries)",
    )
    close: bool = Field(default=False, description="Close the run in the same transaction")


class AppendOut(BaseModel):
    run_id: str
    first_seq: int | None
    last_seq: int


class EventOut(BaseModel):
    seq: int
    type: str
    received_at: str
    chunk: dict[str, Any]


class EventsPage(BaseModel):
    events: list[EventOut]
    next_after: int | None


ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorOut} for status in (400, 401, 403, 404, 409, 413, 422)
}


class ForkIn(BaseModel):
    run_id: str = Field(description="the new run's id")
    at_seq: int | None = Field(
        default=None, description="the last shared event (default: the source's last event)"
    )


class ForkOut(RunOut):
    forked_from: str
    fork_seq: int = Field(description="events up to this seq are the source's, shared")


class VerifyOut(BaseModel):
    ok: bool = Field(description="the run's stored events are its hash chain's, whole")
    events: int = Field(description="events checked (all of them when ok)")
    head: str | None = Field(
        description="the run's chain head as stored (hex; null while the run is not chained)"
    )
    first_bad_seq: int | None = Field(description="the first altered or missing event's seq")
    reason: str | None = Field(
        description="why it failed: hash_mismatch, missing_event, duplicate_event, unchained, "
        "past_last_seq, truncated, head_mismatch or past_head (docs: concepts/integrity)"
    )


class RunVerifyOut(VerifyOut):
    run_id: str


class ThreadVerifyOut(BaseModel):
    thread_id: str
    ok: bool = Field(description="every run of the thread is intact")
    runs: list[RunVerifyOut] = Field(description="each run's answer, oldest run first")
