"""The access rules: which credential may take which action on which run or thread.

Each route declares one `Rule` (what it does, and which run or thread the
request names); the edge turns the request into an `Intent` and asks
`permits`. Keys are judged by scope alone, except that a `run` key reads and
cancels hosted runs only. Tokens are judged by the thread or run they are
bound to, which for a request naming a run means knowing that run's thread:
the one fact the caller looks up (`Lookup`), and only for the credentials
that need it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum

from agent_replay.access.keys import Scope
from agent_replay.access.tokens import Claims, TokenScope


class Action(StrEnum):
    READ = "read"  # GETs: runs, events, streams, messages, hydration, listings
    APPEND = "append"  # the log's writes: create, append, close
    RUN = "run"  # start, join and cancel hosted runs
    ADMIN = "admin"  # tokens, import, prune


class Target(StrEnum):
    """Where a request names the run or thread it touches."""

    NONE = "none"  # no particular run or thread
    RUN = "run"  # the path parameter `run_id`
    THREAD = "thread"  # the path parameter `thread_id`
    THREAD_FILTER = "thread_filter"  # a listing's `?thread_id=`
    CHAT = "chat"  # /v1/chat/{agent}: `runId`/`threadId`, X-Run-Id, Last-Event-ID, the body
    AI_SDK = "ai_sdk"  # POST /v1/ai-sdk/{agent}: a start on the body's chat `id` (its thread)
    AG_UI = "ag_ui"  # POST /v1/agents/{agent}/ag-ui: a start or join (`runId`, `threadId`)


@dataclass(frozen=True, slots=True)
class Rule:
    """What a route needs. Admin keys pass every rule."""

    action: Action
    target: Target = Target.NONE
    # A token bound to the request's thread or run may use the route.
    tokens: bool = True
    # A `run` key may read here too (when the request names a run: hosted runs only).
    run_keys: bool = False
    # The name of a boolean setting that, when true, makes the route public.
    public_if: str | None = None
    # The path parameter naming the run or thread, when not `run_id` / `thread_id`.
    param: str | None = None

    def describe(self) -> dict[str, object]:
        """For the OpenAPI document: the key scopes and the token scope that pass."""
        if self.target is Target.CHAT:
            keys = ["admin", "run", "read (join, hydrate, resume)"]
            token: str | None = "read (join, hydrate, resume) or chat (start)"
        elif self.target in (Target.AI_SDK, Target.AG_UI):
            keys = ["admin", "run"] + (["read (resume)"] if self.target is Target.AG_UI else [])
            token = "chat" + (" (read to resume)" if self.target is Target.AG_UI else "")
        else:
            keys = ["admin"] if self.action is Action.ADMIN else ["admin", self.action.value]
            if self.run_keys:
                keys.append("run (hosted runs)" if self.target is Target.RUN else "run")
            token = "chat" if self.action is Action.RUN else "read"
        described: dict[str, object] = {
            "key_scopes": keys,
            "token": token if self.tokens else None,
            "bound_by": self.target.value,
        }
        if self.public_if:
            described["public_if"] = f"REPLAY_{self.public_if.upper()}=true"
        return described


@dataclass(frozen=True, slots=True)
class Intent:
    """One request, as the rules see it."""

    action: Action
    run_id: str | None = None
    thread_id: str | None = None
    # Starting a new run on `thread_id` (`run_id`: the id the client chose, if any).
    start: bool = False
    tokens: bool = True
    run_keys: bool = False


@dataclass(frozen=True, slots=True)
class RunFacts:
    thread_id: str | None
    hosted: bool


# The run's facts, or None when there is no such run.
Lookup = Callable[[str], Awaitable[RunFacts | None]]
Principal = frozenset[Scope] | Claims


async def permits(principal: Principal, intent: Intent, lookup: Lookup) -> bool:
    if isinstance(principal, Claims):
        return await _token_permits(principal, intent, lookup)
    if Scope.ADMIN in principal:
        return True
    match intent.action:
        case Action.READ:
            if Scope.READ in principal:
                return True
            if Scope.RUN not in principal or not intent.run_keys:
                return False
            if intent.run_id is None:
                return True
            facts = await lookup(intent.run_id)
            return facts is not None and facts.hosted
        case Action.APPEND:
            return Scope.APPEND in principal
        case Action.RUN:
            if Scope.RUN not in principal:
                return False
            if intent.run_id is None:
                return True
            # Hosted runs only; a start may also name a run that does not exist yet.
            facts = await lookup(intent.run_id)
            return facts.hosted if facts is not None else intent.start
    return False


def hosted_runs_only(principal: Principal | None) -> bool:
    """A `run` key (without `read`) reads hosted runs only; on a thread's routes that
    means the thread's hosted runs, its other runs left out."""
    return (
        isinstance(principal, frozenset)
        and Scope.ADMIN not in principal
        and Scope.READ not in principal
    )


async def _token_permits(claims: Claims, intent: Intent, lookup: Lookup) -> bool:
    if not intent.tokens or TokenScope.READ not in claims.scopes:
        return False
    if intent.action is Action.RUN:
        if TokenScope.CHAT not in claims.scopes:
            return False
    elif intent.action is not Action.READ:
        return False
    if intent.start:
        if claims.thread_id is None or intent.thread_id != claims.thread_id:
            return False
        if intent.run_id is None:
            return True
        # A client-chosen id of an existing run would otherwise hand over that run.
        facts = await lookup(intent.run_id)
        return facts is None or facts.thread_id == claims.thread_id
    if intent.run_id is not None:
        if claims.run_id is not None:
            return claims.run_id == intent.run_id
        facts = await lookup(intent.run_id)
        return facts is not None and facts.thread_id == claims.thread_id
    if intent.thread_id is not None:
        return claims.thread_id is not None and claims.thread_id == intent.thread_id
    return False
