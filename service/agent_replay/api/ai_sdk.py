"""`/v1/ai-sdk/{agent}`: the Vercel AI SDK's `DefaultChatTransport`, against hosted runs.

    POST /v1/ai-sdk/{agent}                   sendMessages: start a run on the chat's thread,
                                              answer with its UI message stream
    GET  /v1/ai-sdk/{agent}/{chatId}/stream   reconnectToStream: 204 when the chat has no
                                              active run, else that run so far as a compact
                                              prefix from `start`, then live
    GET  /v1/ai-sdk/{agent}/{chatId}/messages the chat as AI SDK `UIMessage[]`

A chat is a thread (`id` in the transport's body), each response one hosted
run, and each run one assistant message whose id is the run id. The run is
detached: an aborted response (`stop()`, a closed tab) leaves it running, and
`reconnectToStream` (`useChat({ resume: true })`) picks it up, on any replica:
the message so far as one start, one delta and (if it ended) one end per
part (`agent_replay.projector.ai_sdk_compact`), then the live chunks from the
seq that prefix was made at, so a resume costs bytes in proportion to the
content, not to the number of deltas (`?resume=replay`: every chunk again).
The stream is what the AI SDK's own `createUIMessageStreamResponse` sends
(`x-vercel-ai-ui-message-stream: v1`, one `data:` JSON frame per chunk, then
`data: [DONE]`), plus SSE `id:` lines (ignored by the client) and comment
heartbeats.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Path, Query, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.responses import Response

from agent_replay.agents.ai_sdk import REQUEST_KEY
from agent_replay.agents.catalog import HttpAgent
from agent_replay.api.agents import BudgetHeader, OnDisconnectHeader
from agent_replay.api.auth import AI_SDK_READ, AI_SDK_START, reads_hosted_runs_only, requires
from agent_replay.api.bodies import GuardedRoute
from agent_replay.api.deps import AppState, StateDep
from agent_replay.api.forwarding import forwarded_headers
from agent_replay.api.models import ERRORS
from agent_replay.api.reencoded import events_after, events_upto, sse_frames, sse_response
from agent_replay.api.responses import JSON, refuse_erased
from agent_replay.audit.cache import StoredRun, thread_runs
from agent_replay.audit.threads import user_turns
from agent_replay.errors import InvalidRequest
from agent_replay.log.chunks import dumps, loads
from agent_replay.projector.ai_sdk import UIMessageStreamEncoder
from agent_replay.projector.ai_sdk_compact import UIMessageStreamCompactor
from agent_replay.projector.ai_sdk_messages import build_message
from agent_replay.stream import NOW, Plan, parse_offset, plan_stream, sse
from agent_replay.stream.outlet import Outlet

router = APIRouter(
    prefix="/v1/ai-sdk", tags=["chat (Vercel AI SDK)"], responses=ERRORS, route_class=GuardedRoute
)

AgentName = Annotated[str, Path(description="an agent name from GET /v1/agents")]
UI_STREAM_HEADERS = {"x-vercel-ai-ui-message-stream": "v1"}
Approvals = Annotated[
    bool,
    Query(description="send tool-approval-request chunks (AI SDK 6 and later; 5 rejects them)"),
]


class ChatRequest(BaseModel):
    """`DefaultChatTransport`'s body; fields of the transport's `body` option pass through."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(min_length=1, max_length=1000, description="the chat id: the run's thread")
    messages: list[dict[str, Any]] = Field(default_factory=list)
    trigger: str | None = None
    messageId: str | None = None


def _text(parts: Any) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(
        p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
        and isinstance(p.get("text"), str)
    )  # fmt: skip


def agui_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """AI SDK `UIMessage`s as the AG-UI conversation a run's agent reads."""
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        ident = message.get("id") if isinstance(message.get("id"), str) else f"m-{index}"
        role, parts = message.get("role"), message.get("parts")
        text = _text(parts)
        if role in ("user", "system"):
            out.append({"id": ident, "role": role, "content": text})
            continue
        if role != "assistant":
            continue
        calls, results = [], []
        for part in parts if isinstance(parts, list) else []:
            kind = part.get("type") if isinstance(part, dict) else None
            if not isinstance(kind, str) or not (
                kind.startswith("tool-") or kind == "dynamic-tool"
            ):
                continue
            call = part.get("toolCallId")
            name = part.get("toolName") if kind == "dynamic-tool" else kind[len("tool-") :]
            arguments = dumps(part.get("input") or {})
            calls.append(
                {"id": call, "type": "function", "function": {"name": name, "arguments": arguments}}
            )
            if part.get("state") in ("output-available", "output-error"):
                output = part.get("output", part.get("errorText"))
                content = output if isinstance(output, str) else dumps(output)
                results.append(
                    {"id": f"{call}-result", "role": "tool", "toolCallId": call, "content": content}
                )
        assistant: dict[str, Any] = {"id": ident, "role": "assistant"}
        if text:
            assistant["content"] = text
        if calls:
            assistant["toolCalls"] = calls
        out.append(assistant)
        out.extend(results)
    return out


async def _ui_stream(
    state: AppState, run_id: str, *, after: int, approvals: bool, outlet: Outlet
) -> AsyncIterator[bytes]:
    encoder = UIMessageStreamEncoder(run_id, approvals=approvals)
    async for event in events_upto(state, run_id, after):
        encoder.feed(event)  # already delivered: only the encoder's state matters
    plan = await plan_stream(state.hub, run_id, after)
    if not plan.exhausted:
        async for blob in events_after(state, plan, encoder.feed, outlet):
            yield blob
    yield (sse_frames(encoder.end(), None) + sse.frame("[DONE]")).encode()


async def _compact_stream(
    state: AppState, plan: Plan, *, approvals: bool, outlet: Outlet
) -> AsyncIterator[bytes]:
    """The run up to the plan's cursor as a compact prefix, then exactly what follows it."""
    encoder = UIMessageStreamEncoder(plan.run_id, approvals=approvals)
    compactor = UIMessageStreamCompactor()
    async for event in events_upto(state, plan.run_id, plan.cursor):
        compactor.add(encoder.feed(event))
    prefix = compactor.prefix()
    if prefix:
        yield sse_frames(prefix, plan.cursor).encode()
    if not plan.exhausted:
        async for blob in events_after(state, plan, encoder.feed, outlet):
            yield blob
    yield (sse_frames(encoder.end(), None) + sse.frame("[DONE]")).encode()


async def _active_run(state: AppState, chat_id: str, hosted_only: bool) -> StoredRun | None:
    stored = await thread_runs(state.log, chat_id, hosted_only=hosted_only)
    if not stored:
        await refuse_erased(state.log, thread_id=chat_id)
    return next((run for run in reversed(stored) if not run.closed), None)


@router.post(
    "/{agent}",
    responses={200: {"description": "the UI message stream", "content": {"text/event-stream": {}}}},
    dependencies=[requires(AI_SDK_START)],
)
async def send_messages(
    request: Request,
    state: StateDep,
    agent: AgentName,
    body: Annotated[ChatRequest, Body()],
    approvals: Approvals = False,
    x_on_disconnect: OnDisconnectHeader = None,
    x_budget: BudgetHeader = None,
) -> Response:
    """Start a hosted run on the chat's thread; answer with its UI message stream.

    The request headers the agent's `forward_headers` names are sent on to its upstream,
    never stored (431 `forwarded_headers_too_large`, 400 `forwarded_credential`).
    """
    extra = dict(body.model_extra or {})
    on_disconnect = extra.pop("onDisconnect", None)
    run_budget = extra.pop("budget", None)
    redact = extra.pop("redact", None)
    run_input: dict[str, Any] = {
        "threadId": body.id,
        "runId": f"run-{uuid.uuid4().hex}",
        "messages": agui_messages(body.messages),
        "forwardedProps": {
            k: v for k, v in extra.items() if k not in ("tools", "context", "state")
        },
    }
    for key in ("tools", "context", "state"):
        if key in extra:
            run_input[key] = extra[key]
    if on_disconnect is not None:
        run_input["onDisconnect"] = on_disconnect
    if run_budget is not None:
        run_input["budget"] = run_budget
    if redact is not None:
        run_input["redact"] = redact
    hosted = state.drivers.catalog.get(agent)
    if isinstance(hosted, HttpAgent) and hosted.protocol == "ai-sdk":
        # An AI SDK upstream is posted this very body (agent_replay.agents.ai_sdk).
        sent = body.model_dump(exclude_unset=True)  # the fields as the client sent them
        for own in ("onDisconnect", "budget", "redact"):  # the service's, not the agent's
            sent.pop(own, None)
        run_input[REQUEST_KEY] = sent
    run, _ = await state.drivers.start(
        agent, run_input, on_disconnect=x_on_disconnect, budget_header=x_budget,
        forwarded=forwarded_headers(request, agent),
    )  # fmt: skip
    outlet = Outlet()
    return sse_response(
        _ui_stream(state, run.run_id, after=0, approvals=approvals, outlet=outlet),
        state,
        UI_STREAM_HEADERS,
        outlet,
    )


@router.get(
    "/{agent}/{chat_id}/stream",
    responses={
        200: {
            "description": "the active run's UI message stream",
            "content": {"text/event-stream": {}},
        },
        204: {"description": "the chat has no active run"},
    },
    dependencies=[requires(AI_SDK_READ)],
)
async def reconnect_to_stream(
    request: Request,
    state: StateDep,
    agent: AgentName,
    chat_id: Annotated[str, Path(max_length=1000)],
    resume: Annotated[
        str | None,
        Query(
            description="`compact` (the default): the message so far as one chunk per part "
            "start, content and end, then live; `replay`: every chunk from `start`; "
            "`continue`: only what follows Last-Event-ID (resumeStreamIsReplay: false)"
        ),
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
    approvals: Approvals = False,
) -> Response:
    """The chat's active run from its `start`: compacted so far, then live."""
    if resume not in (None, "compact", "replay", "continue"):
        raise InvalidRequest(f"resume={resume!r}: expected compact, replay or continue")
    # A `run` key follows the chat's hosted runs only.
    run = await _active_run(state, chat_id, reads_hosted_runs_only(request))
    if run is None:
        return Response(status_code=204, headers=UI_STREAM_HEADERS)
    if resume in (None, "compact"):
        plan = await plan_stream(state.hub, run.run_id, NOW)
        if plan.cursor == 0 and plan.closed:
            return Response(status_code=204, headers=UI_STREAM_HEADERS)
        outlet = Outlet()
        return sse_response(
            _compact_stream(state, plan, approvals=approvals, outlet=outlet),
            state,
            UI_STREAM_HEADERS,
            outlet,
        )
    after = 0
    if resume == "continue" and last_event_id is not None and last_event_id.strip():
        offset = parse_offset(last_event_id)
        after = run.last_seq if offset == "now" else offset
    plan = await plan_stream(state.hub, run.run_id, after)  # 409 past the run's end
    if plan.exhausted:
        return Response(status_code=204, headers=UI_STREAM_HEADERS)
    outlet = Outlet()
    return sse_response(
        _ui_stream(state, run.run_id, after=after, approvals=approvals, outlet=outlet),
        state,
        UI_STREAM_HEADERS,
        outlet,
    )


def _sent_ids(input_text: str | None) -> set[str] | None:
    """The message ids a run's input carried (None when it carried none)."""
    run_input = loads(input_text) if input_text else None
    wire = run_input.get("messages") if isinstance(run_input, dict) else None
    if not isinstance(wire, list) or not wire:
        return None
    return {m["id"] for m in wire if isinstance(m, dict) and isinstance(m.get("id"), str)}


def _user_message(turn: dict[str, Any]) -> dict[str, Any]:
    parts = [
        {"type": "text", "text": p["content"]} for p in turn["parts"] if p.get("type") == "text"
    ]
    return {"id": turn["id"], "role": "user", "parts": parts}


@router.get("/{agent}/{chat_id}/messages", dependencies=[requires(AI_SDK_READ)])
async def chat_messages(
    request: Request,
    state: StateDep,
    agent: AgentName,
    chat_id: Annotated[str, Path(max_length=1000)],
    approvals: Approvals = False,
) -> Response:
    """The chat as AI SDK `UIMessage[]`, user turns included, for `useChat({ messages })`.

    An active run's assistant message is left out: `resume: true` rebuilds it
    from the stream, and the AI SDK 5 client would append the replay to it.
    An answer a later request no longer sent (`regenerate-message`) is left
    out too. An unknown chat is `[]`.
    """
    messages: list[dict[str, Any]] = []
    # A `run` key reads the chat's hosted runs only.
    stored = await thread_runs(state.log, chat_id, hosted_only=reads_hosted_runs_only(request))
    if not stored:
        await refuse_erased(state.log, thread_id=chat_id)
    for run in stored:
        sent = _sent_ids(run.input)
        if sent is not None:
            # The client sends its whole history; an answer it left out was regenerated.
            messages = [m for m in messages if m["role"] != "assistant" or m["id"] in sent]
        seen = {m["id"] for m in messages}
        messages.extend(
            _user_message(t) for t in user_turns(run.run_id, run.input) if t["id"] not in seen
        )
        if not run.closed:
            continue
        encoder = UIMessageStreamEncoder(run.run_id, approvals=approvals)
        chunks = [
            c
            async for event in events_upto(state, run.run_id, run.last_seq)
            for c in encoder.feed(event)
        ]
        messages.append(build_message(run.run_id, [*chunks, *encoder.end()]))
    return JSON(messages)
