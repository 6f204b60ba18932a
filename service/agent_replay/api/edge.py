"""ASGI layers in front of the routes: `?token=` taken out of the URL, CORS, and the
guards against other sites' pages (`OriginGuard`, `HostGuard`).

`QueryToken` runs first and rewrites the request in place: a `token` query
parameter becomes `Authorization: Bearer …` (unless the request has one) and
leaves the query string, so nothing downstream, the server's access log
included (it formats the same scope), ever sees it in a URL. It is also kept
under `QUERY_CREDENTIAL`, so the access check can refuse an API key there.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import unquote_to_bytes

import orjson
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_replay.errors import HostRefused, OriginRefused, ReplayError

# The scope key under which QueryToken keeps the `?token=` it took out (agent_replay.api.auth).
QUERY_CREDENTIAL = "replay.query_credential"


class QueryToken:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and b"token=" in scope.get("query_string", b""):
            _move_token(scope)
        await self.app(scope, receive, send)


def _move_token(scope: Scope) -> None:
    kept: list[bytes] = []
    token: bytes | None = None
    for part in scope["query_string"].split(b"&"):
        name, _, value = part.partition(b"=")
        if unquote_to_bytes(name.replace(b"+", b" ")) == b"token":
            token = unquote_to_bytes(value.replace(b"+", b" "))
        else:
            kept.append(part)  # byte for byte: the other parameters are not re-encoded
    if token is None:
        return
    # Mutated in place, not copied: the server logs the request from this dict.
    scope["query_string"] = b"&".join(kept)
    scope[QUERY_CREDENTIAL] = token.decode("latin-1").strip()
    headers = list(scope["headers"])
    if not any(name == b"authorization" for name, _ in headers):
        headers.append((b"authorization", b"Bearer " + token))
    scope["headers"] = headers


# What browser clients send (TanStack's and the AI SDK's transports, EventSource
# resumes, the demo and inspector pages, a hosted run's budget and disconnect policy
# set by the page that starts it) and what they read back.
CORS_ALLOW_HEADERS = (
    "Authorization, Content-Type, Last-Event-ID, X-Run-Id, X-Request-Id, Accept, "
    "X-Budget, X-On-Disconnect"
)
# What a browser sends without a preflight asking for it (the fetch standard's forbidden
# and safelisted request headers): never listed again for a forwarded one.
_SENT_ANYWAY = frozenset({"cookie", "accept-language", "content-language", "origin", "referer",
                          "user-agent"})  # fmt: skip
CORS_EXPOSE_HEADERS = (
    "WWW-Authenticate, X-Request-Id, Location, Retry-After, x-vercel-ai-ui-message-stream"
)
CORS_ALLOW_METHODS = "GET, POST, PUT, DELETE, OPTIONS"
# Durable Streams: what its protocol's clients send and read (PROTOCOL.md), for listed
# origins like every other route.
STREAM_PREFIX = "/v1/stream/"
STREAM_ALLOW_HEADERS = (
    "Content-Type, Authorization, If-None-Match, Stream-Seq, Stream-TTL, Stream-Expires-At, "
    "Stream-Closed, Producer-Id, Producer-Epoch, Producer-Seq, Stream-Forked-From, "
    "Stream-Fork-Offset, Stream-Fork-Sub-Offset"
)
STREAM_EXPOSE_HEADERS = (
    "Stream-Next-Offset, Stream-Cursor, Stream-Up-To-Date, Stream-Closed, Stream-TTL, "
    "Stream-Expires-At, Stream-SSE-Data-Encoding, Producer-Epoch, Producer-Seq, "
    "Producer-Expected-Seq, Producer-Received-Seq, ETag, Location, Content-Type, "
    "WWW-Authenticate, X-Request-Id"
)
STREAM_ALLOW_METHODS = "GET, POST, PUT, DELETE, HEAD, OPTIONS"


class Cors:
    """CORS for `REPLAY_CORS_ORIGINS`: nothing at all when none are listed.

    A listed origin gets its preflight answered (204) and `Access-Control-Allow-Origin`
    (itself, with `Vary: Origin`) on every answer, errors included, so a page can
    read a 401 `token_expired` and fetch a fresh token. An unlisted origin's
    preflight is `403 forbidden`; its other requests get no CORS headers, so the
    browser keeps their answers from the page.

    The service's own credentials are bearer headers, never cookies; `forwarded` names
    the request headers hosted agents hand on to their upstreams
    (`agent_replay.agents.forwarding`), which a page must be allowed to send. When one
    is `cookie`, an origin listed by name (never through `*`: that would let any site's
    page start runs with its visitors' cookies) also gets `Allow-Credentials`, so a
    page's `credentials: "include"` request carries the cookies its upstream reads.
    """

    def __init__(self, app: ASGIApp, origins: list[str], forwarded: Sequence[str] = ()) -> None:
        self.app = app
        self.any = "*" in origins
        self.origins = frozenset(o.encode("latin-1") for o in origins if o != "*")
        extra = [name for name in forwarded if name not in _SENT_ANYWAY]
        self.allow_headers = ", ".join([CORS_ALLOW_HEADERS, *extra]).encode()
        self.credentials = "cookie" in forwarded

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self.any or origin in self.origins
        stream = scope["path"].startswith(STREAM_PREFIX)
        credentials = self.credentials and not stream and origin in self.origins
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await self._preflight(origin if allowed else None, send, stream, credentials)
            return
        if not allowed:
            await self.app(scope, receive, send)
            return
        expose = STREAM_EXPOSE_HEADERS if stream else CORS_EXPOSE_HEADERS
        cors = [
            (b"access-control-allow-origin", origin),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", expose.encode()),
        ]
        if credentials:
            cors.append((b"access-control-allow-credentials", b"true"))

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *cors]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(
        self, origin: bytes | None, send: Send, stream: bool, credentials: bool
    ) -> None:
        if origin is None:
            body = (
                b'{"error":{"code":"forbidden","message":"this origin may not call the service"}}'
            )
            headers = [(b"content-type", b"application/json"), (b"vary", b"Origin")]
            status = 403
        else:
            body = b""
            status = 204
            headers = [
                (b"access-control-allow-origin", origin),
                (b"vary", b"Origin"),
                (
                    b"access-control-allow-methods",
                    (STREAM_ALLOW_METHODS if stream else CORS_ALLOW_METHODS).encode(),
                ),
                (
                    b"access-control-allow-headers",
                    STREAM_ALLOW_HEADERS.encode() if stream else self.allow_headers,
                ),
                (b"access-control-max-age", b"600"),
            ]
            if credentials:
                headers.append((b"access-control-allow-credentials", b"true"))
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# Methods that change something; a browser sends `Origin` on every one of them.
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_DEFAULT_PORTS = {b"http": b":80", b"https": b":443"}


class OriginGuard:
    """A write from a page of another site is refused (403 `origin_refused`) before its
    body is read, on every route.

    Browsers send `Origin` on every POST, PUT, PATCH and DELETE, `no-cors` ones
    included, which CORS does not stop (the request is made; only its answer is
    kept from the page). Allowed: the service's own origin (the scheme and `Host`
    the request came with) and the REPLAY_CORS_ORIGINS list. Clients that are no
    browser send no `Origin` and are not concerned.
    """

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.any = "*" in origins
        self.origins = frozenset(o.lower().encode("latin-1") for o in origins if o != "*")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in _WRITES and not self.any:
            origin = _header(scope, b"origin")
            if origin is not None and not self._allowed(scope, origin.lower()):
                await refuse(send, OriginRefused("writes from this origin's pages are refused"))
                return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope, origin: bytes) -> bool:
        if origin in self.origins:
            return True
        host = _header(scope, b"host")
        if host is None:
            return False
        scheme = scope.get("scheme", "http").encode()
        own = scheme + b"://" + _without_port(host.lower(), _DEFAULT_PORTS.get(scheme))
        return bool(origin == own)


# Names that always reach this machine, whatever the DNS says.
_LOOPBACK = frozenset({b"localhost", b"127.0.0.1", b"[::1]"})
_EXEMPT = frozenset({"/healthz", "/readyz"})


class HostGuard:
    """Open mode only: a request whose `Host` is no loopback name and not in
    REPLAY_ALLOWED_HOSTS is refused (403 `host_refused`).

    With no keys, the only thing between a web page and the log is the browser's
    same-origin rule, and a hostile name that resolves to 127.0.0.1 (DNS rebinding)
    makes its page same-origin with the service. Such a page's requests carry its
    own name in `Host`, which is what is refused. Health checks are exempt (a load
    balancer names the address it probes).
    """

    def __init__(self, app: ASGIApp, allowed: list[str]) -> None:
        self.app = app
        self.any = "*" in allowed
        self.allowed = _LOOPBACK | {h.lower().encode("latin-1") for h in allowed}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.any and scope["path"] not in _EXEMPT:
            host = _header(scope, b"host")
            if host is not None and _host_name(host.lower()) not in self.allowed:
                await refuse(
                    send,
                    HostRefused(
                        "with no API keys the service answers loopback names only; "
                        "list this name in REPLAY_ALLOWED_HOSTS"
                    ),
                )
                return
        await self.app(scope, receive, send)


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value)
    return None


def _without_port(host: bytes, default: bytes | None) -> bytes:
    return host[: -len(default)] if default is not None and host.endswith(default) else host


def _host_name(host: bytes) -> bytes:
    """`Host` without its port (`[::1]:8000` -> `[::1]`)."""
    if host.startswith(b"["):
        return host[: host.find(b"]") + 1]
    name, _, port = host.rpartition(b":")
    return name if name and port.isdigit() else host


async def refuse(send: Send, error: ReplayError) -> None:
    """Answer `error` from a layer, before the route (and without reading the body)."""
    body = orjson.dumps(error.body())
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": "http.response.start", "status": error.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
