"""Access at the edge: credentials in, the route's `Rule` applied, 401/403 out.

Every protected route declares its rule as a dependency, so the rule sits
next to the route and shows in the OpenAPI document:

    @router.get("/{run_id}/stream", dependencies=[requires(READ_RUN)])

A request is authenticated (no or unknown credential: 401 `unauthorized`;
an expired token: 401 `token_expired`; an API key in `?token=`: 401
`key_in_query`) before anything else is looked at, its body included
(agent_replay.api.bodies), then authorized (403 `forbidden`, worded the same
whether or not the run exists). With no `REPLAY_API_KEYS` the service is open
and nothing is checked.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import fastapi.routing
from fastapi import Depends, FastAPI, Request, Security
from fastapi.routing import APIRoute
from fastapi.security import APIKeyQuery, HTTPAuthorizationCredentials, HTTPBearer

from agent_replay.access import Claims, KeyRing, Rule, TokenSigner
from agent_replay.access.policy import (
    Action,
    Intent,
    Principal,
    RunFacts,
    Target,
    hosted_runs_only,
    permits,
)
from agent_replay.access.tokens import TokenExpired, TokenInvalid, check_secret
from agent_replay.api.edge import QUERY_CREDENTIAL
from agent_replay.errors import Forbidden, InvalidCredential, InvalidRunId, KeyInQuery, Unauthorized
from agent_replay.errors import TokenExpired as TokenExpiredError
from agent_replay.log import Administration, RunStates, check_run_id

# The rules the routes use. A new route picks one (or makes its own Rule).
READ = Rule(Action.READ, tokens=False)  # reads of no particular run or thread
READ_RUN = Rule(Action.READ, Target.RUN, run_keys=True)  # a run's record, events, stream, messages
EXPORT_RUN = Rule(Action.READ, Target.RUN, tokens=False)
READ_THREAD = Rule(Action.READ, Target.THREAD)
LIST_RUNS = Rule(Action.READ, Target.THREAD_FILTER)  # tokens: with their own ?thread_id= only
LIST_AGENTS = Rule(Action.READ, tokens=False, run_keys=True)
# The Vercel AI SDK's chat: a start on the body's `id`; reads of the path's chat (a thread).
AI_SDK_START = Rule(Action.RUN, Target.AI_SDK)
AI_SDK_READ = Rule(Action.READ, Target.THREAD, run_keys=True, param="chat_id")
AG_UI = Rule(Action.RUN, Target.AG_UI, run_keys=True)  # see _intent
APPEND = Rule(Action.APPEND, Target.RUN, tokens=False)
FORK_RUN = APPEND  # a new run from the path run's prefix: a write, nothing read back
WRITE = Rule(Action.APPEND, tokens=False)  # writes of no particular run (Durable Streams)
START_RUN = Rule(Action.RUN, tokens=False)
CANCEL_RUN = Rule(Action.RUN, Target.RUN)  # tokens with `chat`
CHAT = Rule(Action.RUN, Target.CHAT, run_keys=True)  # see _chat_intent
ADMIN = Rule(Action.ADMIN, tokens=False)
METRICS = Rule(Action.ADMIN, tokens=False, public_if="metrics_public")

TOKEN_SECRET_NAME = "token_secret"
# Scope keys: the body as agent_replay.api.bodies parsed it (None: no body), and the
# credential a request was authorized with.
PARSED_BODY = "replay.parsed_body"
PRINCIPAL = "replay.principal"


class GateLog(RunStates, Administration, Protocol):
    """What the gate asks of the log: the token secret, and the runs a token may name."""


class Gate:
    """The keys, and the token signer (its secret read once, then kept).

    Made with the app (a bad key list or secret fails at start); `bind` gives
    it the log once the lifespan has opened one.
    """

    def __init__(self, keys: KeyRing, secret: str | None, previous: list[str]) -> None:
        self.keys = keys
        self._secret = None if secret is None else check_secret(secret, "REPLAY_TOKEN_SECRET")
        self._previous = [check_secret(s, "REPLAY_TOKEN_SECRET_PREVIOUS") for s in previous]
        self._log: GateLog | None = None
        self._signer: TokenSigner | None = None
        self._lock = asyncio.Lock()

    def bind(self, log: GateLog) -> Gate:
        self._log, self._signer = log, None
        return self

    @property
    def log(self) -> GateLog:
        assert self._log is not None, "Gate.bind(log) first"
        return self._log

    async def signer(self) -> TokenSigner:
        if self._signer is None:
            async with self._lock:
                if self._signer is None:
                    # Unset: one random secret for the whole deployment, kept in
                    # the database, so every replica verifies every replica's tokens.
                    current = self._secret or await self.log.shared_secret(
                        TOKEN_SECRET_NAME, secrets.token_urlsafe(48)
                    )
                    self._signer = TokenSigner(current, self._previous)
        return self._signer

    async def principal(self, credential: str | None) -> Principal:
        if not credential:
            raise Unauthorized("this request needs 'Authorization: Bearer <key or token>'")
        scopes = self.keys.scopes(credential)
        if scopes is not None:
            return scopes
        if credential.count(".") == 2:
            signer = await self.signer()
            try:
                return signer.verify(credential)
            except TokenExpired as exc:
                raise TokenExpiredError("the token has expired; get a new one") from exc
            except TokenInvalid:
                pass
        raise InvalidCredential("the credential is not a key or token this service accepts")


async def authenticate(request: Request) -> None:
    """401 unless the request carries a known credential (or the service is open).

    For answers given before a route's own rule runs (a refusal of the body must
    not tell an unauthenticated caller anything): agent_replay.api.bodies checks the
    credential before it reads a body, and the error handlers before they answer.
    """
    route = request.scope.get("route")
    rule = rule_of(route) if isinstance(route, APIRoute) else None
    if rule is not None:
        await check_credential(request, rule)


async def check_credential(request: Request, rule: Rule) -> None:
    """401 unless the request carries a credential `rule` could pass (or needs none)."""
    state = request.app.state.replay
    if not (state.gate.keys.open or (rule.public_if and getattr(state.settings, rule.public_if))):
        await principal_of(request, state.gate)


def bearer(request: Request) -> str | None:
    """The credential of `Authorization: Bearer …` (a `?token=` was moved there
    by agent_replay.api.edge before the request got here)."""
    scheme, _, credential = request.headers.get("authorization", "").partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else None


async def principal_of(request: Request, gate: Gate) -> Principal:
    """The request's credential, known; an API key in the URL is refused wherever it is:
    URLs end up in logs, browser history and Referer headers, and keys do not expire."""
    queried = request.scope.get(QUERY_CREDENTIAL)
    if queried is not None and gate.keys.scopes(queried) is not None:
        raise KeyInQuery(
            "API keys are not accepted in ?token= (only tokens from POST /v1/tokens are); "
            "send the key in an 'Authorization: Bearer <key>' header"
        )
    return await gate.principal(bearer(request))


def caller_id(request: Request) -> str:
    """Who a request acts as, for a record that keeps it (an erasure's tombstones): the
    key's id (`KeyRing.key_id`), or `open` when the service has no keys. Never the
    secret itself."""
    gate: Gate = request.app.state.replay.gate
    credential = bearer(request)
    if gate.keys.open or not credential:
        return "open"
    return gate.keys.key_id(credential)


def reads_hosted_runs_only(request: Request) -> bool:
    """Whether the request's credential reads hosted runs only (a `run` key): a route that
    reads a whole thread then leaves the thread's other runs out."""
    return hosted_runs_only(request.scope.get(PRINCIPAL))


async def authorize(request: Request, rule: Rule) -> Principal | None:
    """Raise 401/403 unless the request's credential passes `rule`; None when open."""
    state = request.app.state.replay
    gate: Gate = state.gate
    if gate.keys.open or (rule.public_if and getattr(state.settings, rule.public_if)):
        return None
    principal = await principal_of(request, gate)
    intent = await _intent(rule, request)

    async def lookup(run_id: str) -> RunFacts | None:
        try:
            check_run_id(run_id)
        except InvalidRunId:
            return None
        run = await gate.log.find_run(run_id)
        return None if run is None else RunFacts(run.thread_id, run.agent is not None)

    if not await permits(principal, intent, lookup):
        raise Forbidden(f"this credential does not allow {request.method} {request.url.path}")
    request.scope[PRINCIPAL] = principal
    return principal


async def _intent(rule: Rule, request: Request) -> Intent:
    base = Intent(rule.action, tokens=rule.tokens, run_keys=rule.run_keys)
    match rule.target:
        case Target.RUN:
            return _with(base, run_id=request.path_params.get(rule.param or "run_id"))
        case Target.THREAD:
            return _with(base, thread_id=request.path_params.get(rule.param or "thread_id"))
        case Target.THREAD_FILTER:
            return _with(base, thread_id=request.query_params.get("thread_id"))
        case Target.CHAT:
            return await _chat_intent(base, request)
        case Target.AI_SDK:
            fields = await _body_fields(request)
            return _with(base, thread_id=_text(fields.get("id")), start=True)
        case Target.AG_UI:
            # A start, or a join of the body's run: either way the run is on the body's
            # thread (a join of another thread's run is refused like a start with its id).
            fields = await _body_fields(request)
            run_id = _text(fields.get("runId"))
            if "last-event-id" in request.headers:
                return _with(base, action=Action.READ, run_id=run_id)
            return _with(base, run_id=run_id, thread_id=_text(fields.get("threadId")), start=True)
    return base


async def _body_fields(request: Request) -> dict[str, Any]:
    """The JSON body's top-level fields ({} when it is not an object), from the one parse
    agent_replay.api.bodies made, which the route's model reads too."""
    if PARSED_BODY not in request.scope:
        # Never parse again here: a second parser may read another run out of the body.
        raise RuntimeError(f"{request.url.path}: the route is not a GuardedRoute")
    body = request.scope[PARSED_BODY]
    return body if isinstance(body, dict) else {}


def _with(intent: Intent, **changes: Any) -> Intent:
    return Intent(**{**{f: getattr(intent, f) for f in Intent.__slots__}, **changes})


async def _chat_intent(base: Intent, request: Request) -> Intent:
    """GET joins (`runId`) or hydrates (`threadId`): a read. POST resumes (with
    Last-Event-ID: a read of the run) or starts a run on the body's thread."""
    query = request.query_params
    if request.method != "POST":
        return _with(base, action=Action.READ, run_id=query.get("runId"),
                     thread_id=None if "runId" in query else query.get("threadId"))  # fmt: skip
    fields = await _body_fields(request)
    run_id = request.headers.get("x-run-id") or _text(fields.get("runId"))
    if "last-event-id" in request.headers:
        return _with(base, action=Action.READ, run_id=run_id)
    return _with(base, run_id=run_id, thread_id=_text(fields.get("threadId")), start=True)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


# Documentation only: the OpenAPI document's security schemes. The credential
# itself is read by `bearer` (a token in the query has become a header by then).
_BEARER = HTTPBearer(
    scheme_name="bearer", auto_error=False, description="an API key or a token (POST /v1/tokens)"
)
_QUERY = APIKeyQuery(
    name="token", scheme_name="token", auto_error=False,
    description="a token, for clients that cannot send headers (EventSource); never logged",
)  # fmt: skip


class Requires:
    """The dependency a route declares: `Depends(Requires(rule))`, via `requires`."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule

    async def __call__(
        self,
        request: Request,
        _header: Annotated[HTTPAuthorizationCredentials | None, Security(_BEARER)],
        _query: Annotated[str | None, Security(_QUERY)],
    ) -> Principal | None:
        return await authorize(request, self.rule)


def requires(rule: Rule) -> Any:
    return Depends(Requires(rule))


@dataclass(frozen=True, slots=True)
class Endpoint:
    path: str
    methods: frozenset[str]
    rule: Rule | None
    in_schema: bool


def endpoints(app: FastAPI) -> Iterator[Endpoint]:
    """Every route of the app with its rule (None: public, or checked by hand)."""
    # FastAPI >= 0.16x keeps included routers unflattened; older ones list routes.
    flatten = getattr(fastapi.routing, "iter_route_contexts", None)
    for route in flatten(app.routes) if flatten else app.routes:
        path, methods = getattr(route, "path_format", None), getattr(route, "methods", None)
        if path is None or methods is None:
            continue
        in_schema = bool(getattr(route, "include_in_schema", True))
        yield Endpoint(path, frozenset(methods), rule_of(route), in_schema)


def rule_of(route: Any) -> Rule | None:
    """The rule a route declares with `requires` (None: public, or checked by hand)."""
    dependant = getattr(route, "dependant", None)
    for dependency in dependant.dependencies if dependant is not None else ():
        if isinstance(dependency.call, Requires):
            rule: Rule = dependency.call.rule
            return rule
    return None


def document_access(app: FastAPI) -> None:
    """Each operation in the OpenAPI document says its rule (`x-access`)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = build()
        for endpoint in endpoints(app):
            if endpoint.rule is None or not endpoint.in_schema:
                continue
            for method in endpoint.methods:
                operation = schema["paths"].get(endpoint.path, {}).get(method.lower())
                if operation is not None:
                    operation["x-access"] = endpoint.rule.describe()
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


__all__ = ["Claims", "Endpoint", "Gate", "authorize", "document_access", "endpoints", "requires"]
