"""The headers every HTML answer of the service carries: a Content-Security-Policy that
allows what its page needs and nothing more, and no framing.

A page's own inline `<script>` and `<style>` blocks are allowed by their SHA-256,
never by `'unsafe-inline'` for script: markup that slipped through a page's
escaping cannot run. Hashes of a fixed page (the demo, Swagger UI) are taken
from its bytes as served, once, so an edit to the page cannot leave its policy
behind; a page built from stored data (a transcript) hashes only its fixed
parts, never what it was built from. No page may be framed by another
(`frame-ancestors 'none'`, and `X-Frame-Options: DENY` for browsers before
CSP 2): the demo page asks for an admin key, and a framed page can be
clickjacked. No plugin, no `<base>`, no referrer, no type sniffing.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Iterable

from starlette.responses import Response

_INLINE = re.compile(rb"<(script|style)\b([^>]*)>(.*?)</\1\s*>", re.S | re.I)


def inline_blocks(html: bytes) -> tuple[list[bytes], list[bytes]]:
    """The texts of a fixed page's inline scripts and styles (a `<script src>` is no inline)."""
    scripts: list[bytes] = []
    styles: list[bytes] = []
    for match in _INLINE.finditer(html):
        tag, attributes, text = match.groups()
        if tag.lower() == b"style":
            styles.append(text)
        elif b"src=" not in attributes.lower():
            scripts.append(text)
    return scripts, styles


def _hashes(blocks: Iterable[bytes]) -> list[str]:
    return [f"'sha256-{base64.b64encode(hashlib.sha256(b).digest()).decode()}'" for b in blocks]


def page_headers(
    *,
    scripts: Iterable[bytes] = (),
    styles: Iterable[bytes] = (),
    script_src: str = "",
    style_src: str = "",
    img_src: str = "",
    connect_src: str = "",
    worker_src: str = "",
) -> dict[str, str]:
    """The headers for a page whose inline blocks are `scripts` and `styles`, loading
    what the `*_src` sources allow (each `'none'` when empty)."""

    def sources(*parts: str) -> str:
        return " ".join(p for p in parts if p) or "'none'"

    directives = {
        "default-src": "'none'",
        "script-src": sources(script_src, *_hashes(scripts)),
        "style-src": sources(style_src, *_hashes(styles)),
        "img-src": sources(img_src),
        "connect-src": sources(connect_src),
        "worker-src": sources(worker_src),
        "object-src": "'none'",
        "base-uri": "'none'",
        "form-action": "'self'",
        "frame-ancestors": "'none'",
    }
    return {
        "Content-Security-Policy": "; ".join(f"{k} {v}" for k, v in directives.items()),
        "X-Frame-Options": "DENY",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }


def html(body: bytes, headers: dict[str, str]) -> Response:
    return Response(body, media_type="text/html; charset=utf-8", headers=headers)
