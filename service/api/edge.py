"""ASGI layers in front of the routes: `?token=` taken out of the URL, and CORS.

`QueryToken` runs first and rewrites the request in place: a `token` query
parameter becomes `Authorization: Bearer …` (unless the request has one) and
leaves the query string, so nothing downstream, the server's access log
included (it formats the same scope), ever sees it in a URL. It is also kept
under `QUERY_CREDENTIAL`, so the access check can refuse an API key there.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# The scope key under which QueryToken keeps the `?token=` it took out (service.api.auth).
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
# resumes, the demo and inspector pages) and what they read back.
CORS_ALLOW_HEADERS = "Authorization, Content-Type, Last-Event-ID, X-Run-Id, X-Request-Id, Accept"
CORS_EXPOSE_HEADERS = (
    "WWW-Authenticate, X-Request-Id, Location, Retry-After, x-vercel-ai-ui-message-stream"
)
CORS_ALLOW_METHODS = "GET, POST, PUT, DELETE, OPTIONS"
# Durable Streams answers CORS itself, as its protocol specifies (service.api.durable).
_OWN_CORS = "/v1/stream/"


class Cors:
    """CORS for `REPLAY_CORS_ORIGINS`: nothing at all when none are listed.

    A listed origin gets its preflight answered (204) and `Access-Control-Allow-Origin`
    (itself, with `Vary: Origin`) on every answer, errors included, so a page can
    read a 401 `token_expired` and fetch a fresh token. An unlisted origin's
    preflight is `403 forbidden`; its other requests get no CORS headers, so the
    browser keeps their answers from the page. No cookies are involved (the
    credentials are bearer headers), so no `Allow-Credentials`.
    """

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.any = "*" in origins
        self.origins = frozenset(o.encode("latin-1") for o in origins if o != "*")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith(_OWN_CORS):
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        origin = headers.get(b"origin")
        if origin is None:
            await self.app(scope, receive, send)
            return
        allowed = self.any or origin in self.origins
        if scope["method"] == "OPTIONS" and b"access-control-request-method" in headers:
            await self._preflight(origin if allowed else None, send)
            return
        if not allowed:
            await self.app(scope, receive, send)
            return
        cors = [
            (b"access-control-allow-origin", origin),
            (b"vary", b"Origin"),
            (b"access-control-expose-headers", CORS_EXPOSE_HEADERS.encode()),
        ]

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *cors]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, origin: bytes | None, send: Send) -> None:
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
                (b"access-control-allow-methods", CORS_ALLOW_METHODS.encode()),
                (b"access-control-allow-headers", CORS_ALLOW_HEADERS.encode()),
                (b"access-control-max-age", b"600"),
            ]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
