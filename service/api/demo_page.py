"""`GET /`: a one-page chat with the built-in demo agent, to see resume work in a browser."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from starlette.responses import HTMLResponse

router = APIRouter(include_in_schema=False)

_PAGE = Path(__file__).resolve().parent / "static" / "demo.html"


@router.get("/")
async def demo_page() -> HTMLResponse:
    return HTMLResponse(_PAGE.read_text(encoding="utf-8"))
