"""`/inspect`: the run inspector, a browser client of the public `/v1` API.

Three addresses serve one page (`static/inspect.html`, with its script and
style beside it; no build step, nothing from another origin): the run list,
a run, a thread. The page reads everything through `/v1` with the key the
person gives it (kept in sessionStorage), so it works against any replica.

The pages are open (they hold no data); a strict Content-Security-Policy
allows only this origin's script and style, so even markup that slipped
through the page's own escaping could not run, and no other page may frame
them (`agent_replay.api.pages`).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import Response

from agent_replay.api.pages import page_headers
from agent_replay.errors import NotFound

router = APIRouter(include_in_schema=False)

_STATIC = Path(__file__).resolve().parent / "static"
_HEADERS = {
    **page_headers(
        script_src="'self'", style_src="'self'", img_src="'self' data:", connect_src="'self'"
    ),
    "Cache-Control": "no-cache",
}
_ASSETS = {
    "inspect.js": "text/javascript; charset=utf-8",
    "inspect.css": "text/css; charset=utf-8",
}


def _page() -> Response:
    body = (_STATIC / "inspect.html").read_bytes()
    return Response(body, media_type="text/html; charset=utf-8", headers=_HEADERS)


@router.get("/inspect")
async def inspect_runs() -> Response:
    return _page()


@router.get("/inspect/runs/{run_id}")
async def inspect_run(run_id: str) -> Response:
    return _page()


@router.get("/inspect/threads/{thread_id}")
async def inspect_thread(thread_id: str) -> Response:
    return _page()


@router.get("/inspect/assets/{name}")
async def inspect_asset(name: str) -> Response:
    media = _ASSETS.get(name)
    if media is None:
        raise NotFound(f"the inspector has no asset {name!r}")
    return Response((_STATIC / name).read_bytes(), media_type=media, headers=_HEADERS)
