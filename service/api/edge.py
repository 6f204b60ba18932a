"""ASGI layers in front of the routes: `?token=` taken out of the URL, CORS.

`QueryToken` runs first and rewrites the request in place: a `token` query
parameter becomes `Authorization: Bearer …` (unless the request has one) and
leaves the query string, so nothing downstream, the server's access log
included (it formats the same scope), ever sees it in a URL.
"""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send


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
    headers = list(scope["headers"])
    if not any(name == b"authorization" for name, _ in headers):
        headers.append((b"authorization", b"Bearer " + token))
    scope["headers"] = headers
