"""Every HTML page of the service carries a Content-Security-Policy that allows no script
but its own, no framing, no plugin and no <base>, with `X-Frame-Options: DENY`, `nosniff`
and no referrer; the HTML transcript runs no script at all. In Chromium the pages still
render with no violation, and a page on another origin that frames them gets nothing.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from tests.support.servers import serve_asgi

NODE = Path(__file__).resolve().parents[1] / "node"
PAGES = ["/", "/docs", "/docs/oauth2-redirect", "/redoc", "/inspect", "/inspect/runs/r-1"]


def _directives(policy: str) -> dict[str, list[str]]:
    parts = [d.split() for d in policy.split(";") if d.strip()]
    return {d[0]: d[1:] for d in parts}


def _assert_locked(headers: httpx.Headers) -> dict[str, list[str]]:
    csp = _directives(headers["content-security-policy"])
    assert csp["frame-ancestors"] == ["'none'"]
    assert csp["object-src"] == ["'none'"] and csp["base-uri"] == ["'none'"]
    assert csp["default-src"] == ["'none'"]
    # Script runs from this origin or by hash: never inline text as such, never eval.
    assert not {"'unsafe-inline'", "'unsafe-eval'", "*", "data:"} & set(csp["script-src"])
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "no-referrer"
    return csp


@pytest.mark.parametrize("path", PAGES)
async def test_html_page_when_served_then_csp_forbids_framing_plugins_base_and_foreign_script(
    client: httpx.AsyncClient, path: str
) -> None:
    r = await client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    _assert_locked(r.headers)


async def test_html_transcript_when_served_then_its_policy_allows_no_script_at_all(
    client: httpx.AsyncClient,
) -> None:
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "<script>x()</script>"}
    r = await client.post("/v1/runs/page-headers-run/events", json={"events": [event]})
    assert r.status_code in (200, 201), r.text
    r = await client.get("/v1/runs/page-headers-run/transcript", params={"format": "html"})
    assert r.status_code == 200, r.text
    csp = _assert_locked(r.headers)
    assert csp["script-src"] == ["'none'"] and csp["img-src"] == ["'none'"]
    assert [s[:8] for s in csp["style-src"]] == ["'sha256-"]
    assert "<script>x()" not in r.text


_ATTACKER = """<!doctype html><title>another site</title>
<iframe id="f" width="800" height="600"></iframe>
<script>
  const f = document.getElementById("f");
  f.addEventListener("load", () => { window.__frameLoaded = true; });
  f.src = new URLSearchParams(location.search).get("frame");
</script>"""


@pytest.fixture
async def attacker() -> AsyncIterator[str]:
    """A page on another loopback origin (another port) that frames what `?frame=` names."""

    async def page(request: Request) -> HTMLResponse:
        return HTMLResponse(_ATTACKER)

    async with serve_asgi(Starlette(routes=[Route("/", page)])) as base:
        yield base + "/"


async def test_pages_in_chromium_when_framed_by_another_origin_then_blocked_and_alone_render(
    client: httpx.AsyncClient, attacker: str, node_harness: Path
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
    base = str(client.base_url).rstrip("/")
    proc = await asyncio.create_subprocess_exec(
        "node", "browser_pages.mjs", base, attacker, cwd=NODE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 180)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    for path, frame in result["framed"].items():
        assert not frame["reached"], (path, frame)
        assert frame["url"] in ("chrome-error://chromewebdata/", "about:blank"), (path, frame)
    for path, seen in result["pages"].items():
        assert seen["rendered"], (path, seen)
        # The one thing a policy may stop is a load off the service (ReDoc's logo from its
        # CDN): the pages work with no network beyond the service. Nothing of their own.
        blocked = [v.split(" ", 1)[1] for v in seen["violations"]]
        assert all(u.startswith("https://") and not u.startswith(base) for u in blocked), seen
        errors = [e for e in seen["errors"] if "Content Security Policy" not in e]
        assert errors == [], (path, seen)
