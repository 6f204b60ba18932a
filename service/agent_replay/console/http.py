"""A small blocking HTTP client for the API: JSON requests and an SSE event reader.

Blocking on purpose: `agent-replay tail` does one thing at a time (read the stream,
print), and the standard library's `http.client` reads a response a line at
a time without a dependency or an event loop.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit


class ApiError(Exception):
    """The service answered with an error (`status`, `code` from its error body)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})")
        self.status = status
        self.code = code
        self.message = message


class Unreachable(Exception):
    """No answer: refused, reset, timed out, or the connection dropped mid-response."""


@dataclass(frozen=True, slots=True)
class SseEvent:
    id: str | None
    event: str | None
    data: str


class Api:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        self._key = api_key
        self._timeout = timeout

    def _connection(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        return cls(self._host, self._port, timeout=self._timeout)

    def _headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "replay-tail"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        return {**headers, **(extra or {})}

    def _request(
        self, path: str, params: dict[str, str] | None, headers: dict[str, str]
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        target = self._prefix + path + (f"?{urlencode(params)}" if params else "")
        conn = self._connection()
        try:
            conn.request("GET", target, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise Unreachable(f"{self._host}:{self._port or ''} {exc}") from exc

    @staticmethod
    def _raise_for(response: http.client.HTTPResponse) -> None:
        body = response.read()
        try:
            error = json.loads(body)["error"]
            code, message = str(error["code"]), str(error["message"])
        except (ValueError, KeyError, TypeError):
            code, message = "http_error", body[:200].decode(errors="replace") or response.reason
        raise ApiError(response.status, code, message)

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        conn, response = self._request(path, params, self._headers())
        try:
            if response.status >= 400:
                self._raise_for(response)
            try:
                return json.loads(response.read())
            except (OSError, http.client.HTTPException) as exc:
                raise Unreachable(str(exc)) from exc
        finally:
            conn.close()

    def events(
        self, path: str, params: dict[str, str] | None = None, last_event_id: str | None = None
    ) -> Iterator[SseEvent]:
        """The SSE events of `path` until the server ends the response (204: none).

        A connection that drops mid-response raises `Unreachable` after the
        last complete event; an event cut in the middle is never yielded.
        """
        extra = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            extra["Last-Event-ID"] = last_event_id
        conn, response = self._request(path, params, self._headers(extra))
        try:
            if response.status == 204:
                return
            if response.status >= 400:
                self._raise_for(response)
            fields: dict[str, str] = {}
            data: list[str] = []
            while True:
                try:
                    raw = response.readline()
                except (TimeoutError, OSError, http.client.HTTPException) as exc:
                    raise Unreachable(f"the stream broke: {exc}") from exc
                if not raw:
                    # The end of the body as framed (a cut chunked body raises
                    # IncompleteRead above instead).
                    return
                line = raw.decode("utf-8", errors="surrogateescape").rstrip("\r\n")
                if not line:
                    if data:
                        yield SseEvent(fields.get("id"), fields.get("event"), "\n".join(data))
                    fields, data = {}, []
                    continue
                if line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                elif name in ("id", "event"):
                    fields[name] = value
        finally:
            conn.close()
