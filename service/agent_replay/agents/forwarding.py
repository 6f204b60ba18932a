"""Which of a starting request's headers a hosted run's HTTP upstream is sent.

An agent's `"forward_headers"` is an allowlist: `["cookie", "x-user-id"]` sends those
request headers on under their own names; `{"x-upstream-authorization":
"authorization"}` sends the request's `X-Upstream-Authorization` as the upstream's
`Authorization` (request header → upstream header). A Next.js chat route identifies
its user by such headers, so a per-user backend works behind the service only if the
request that starts the run hands them on.

Checked once, at start-up (a bad list fails it, naming the agent):

- names are HTTP tokens, each request header forwarded once, each upstream header
  filled once, at most `MAX_FORWARDED` of them;
- no hop-by-hop header (`connection`, `host`, `content-length`, `transfer-encoding`,
  ...) and none of the request's framing the service writes itself (`content-type`,
  `accept`, `accept-encoding`, `content-encoding`), on either side;
- never `authorization` as a request header: that is where the service's own key or
  token travels (a `?token=` is moved there too), so forwarding it would hand the
  upstream the service's credential. The rename form is how a browser sends the
  upstream its own `Authorization`;
- never an upstream header the agent sets itself (its `headers`, or `authorization`
  when its URL has a user): the agent's own value is what its upstream is promised,
  so a forwarded one would never be sent, and a list that says otherwise is a mistake.

The values picked (`Forwarding.pick`) are bounded (`MAX_FORWARDED_BYTES` in all) and
live only in the driving process's memory: never in the run's input or metadata,
the log's rows, its exports or log lines (`agent_replay.agents.wire` blanks them in a
failed upstream's error text as it does the agent's own secrets). A run driven
after this process is gone is closed by a reaper, never driven again without them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from agent_replay.errors import ForwardedHeadersTooLarge, InvalidRequest

# How many headers one agent may forward, and how many bytes their values may hold in
# all: a request's headers are the caller's, and each one is kept for the run's life.
MAX_FORWARDED = 16
MAX_FORWARDED_BYTES = 16 * 1024

# RFC 9110's token: what a field name may be.
_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,128}")
# Hop-by-hop (they describe one connection, not the request) and what frames the
# request the service writes: forwarding any would break or smuggle the upstream's request.
REFUSED = frozenset({
    "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
    "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host",
    "content-length", "expect", "http2-settings",
    "content-type", "content-encoding", "accept", "accept-encoding",
})  # fmt: skip
# The request header carrying the service's own credential.
CREDENTIAL = "authorization"
# Several values of one field are joined with ", ", but cookies with "; " (RFC 6265).
_JOINERS = {"cookie": "; "}


@dataclass(frozen=True, slots=True)
class Forwarding:
    """(request header, upstream header) pairs, lowercase; empty: nothing is forwarded."""

    pairs: tuple[tuple[str, str], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.pairs)

    @property
    def sources(self) -> tuple[str, ...]:
        """The request headers read: a browser must be allowed to send them (CORS)."""
        return tuple(source for source, _ in self.pairs)

    @property
    def targets(self) -> frozenset[str]:
        return frozenset(target for _, target in self.pairs)

    def pick(self, headers: Iterable[tuple[str, str]]) -> dict[str, str]:
        """The upstream headers to send for a request's `headers` (name, value pairs;
        names lowercase, a name possibly repeated). 431 when the values are too large."""
        wanted = dict(self.pairs)
        found: dict[str, list[str]] = {}
        for name, value in headers:
            if name in wanted:
                found.setdefault(name, []).append(value)
        picked: dict[str, str] = {}
        size = 0
        for source, values in found.items():
            value = _JOINERS.get(source, ", ").join(values)
            size += len(value.encode("latin-1", "replace"))
            picked[wanted[source]] = value
        if size > MAX_FORWARDED_BYTES:
            raise ForwardedHeadersTooLarge(
                f"the headers forwarded to this agent ({', '.join(sorted(found))}) hold "
                f"{size} bytes; at most {MAX_FORWARDED_BYTES} are forwarded"
            )
        return picked


NONE = Forwarding()


def parse(value: Any, where: str, fixed: Iterable[str] = ()) -> Forwarding:
    """An agent's `forward_headers` (`where` names it in errors); `fixed`: the upstream
    headers the agent sets itself, which a forwarded one may not fill."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        pairs = [(v, v) for v in value]
    elif isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        pairs = list(value.items())
    else:
        raise InvalidRequest(
            f'{where} must be a list of header names or {{"request header": "upstream header"}}'
        )
    if len(pairs) > MAX_FORWARDED:
        raise InvalidRequest(f"{where}: {len(pairs)} headers; at most {MAX_FORWARDED}")
    own = {name.lower() for name in fixed}
    checked: list[tuple[str, str]] = []
    for source, target in pairs:
        for name in (source, target):
            if not _NAME.fullmatch(name):
                raise InvalidRequest(f"{where}: {name!r} is not a header name")
            if name.lower() in REFUSED:
                raise InvalidRequest(
                    f"{where}: {name!r} is not forwarded (a hop-by-hop header, or one the "
                    "service writes itself)"
                )
        source, target = source.lower(), target.lower()
        if source == CREDENTIAL:
            raise InvalidRequest(
                f"{where}: 'authorization' carries this service's own key or token and is "
                "never forwarded; send the upstream's under another name: {\"x-upstream-"
                'authorization": "authorization"}'
            )
        if target in own:
            raise InvalidRequest(
                f"{where}: the agent sets {target!r} itself (its headers or URL), so a "
                "forwarded one would never be sent"
            )
        if any(source == s for s, _ in checked):
            raise InvalidRequest(f"{where}: {source!r} is forwarded twice")
        if any(target == t for _, t in checked):
            raise InvalidRequest(f"{where}: two request headers fill {target!r}")
        checked.append((source, target))
    return Forwarding(tuple(checked))
