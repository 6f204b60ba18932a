"""`GET /`: a one-page chat with the built-in demo agent, to see resume work in a browser.

The page asks for an admin key: it may not be framed, and only its own inline
script and style run (`agent_replay.api.pages`).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import Response

from agent_replay.api.pages import html, inline_blocks, page_headers

router = APIRouter(include_in_schema=False)

_PAGE = (Path(__file__).resolve().parent / "static" / "demo.html").read_bytes()
_SCRIPTS, _STYLES = inline_blocks(_PAGE)
_HEADERS = {
    **page_headers(scripts=_SCRIPTS, styles=_STYLES, img_src="'self'", connect_src="'self'"),
    "Cache-Control": "no-cache",
}


@router.get("/")
async def demo_page() -> Response:
    return html(_PAGE, _HEADERS)
