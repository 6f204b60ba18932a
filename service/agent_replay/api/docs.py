"""The API's own pages: Swagger UI at `/docs`, ReDoc at `/redoc`, and the favicon.

Both pages load their scripts and stylesheets from this service (the pinned
`fastapi-offline` wheel ships Swagger UI's and ReDoc's bundles), so they work
with no network beyond the service itself, and each page's Content-Security-
Policy allows only that (`agent_replay.api.pages`).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from agent_replay.api.pages import html, inline_blocks, page_headers

ASSETS = "/static/docs"
FAVICON = "/favicon.svg"
_FAVICON_SVG = (Path(__file__).resolve().parent / "static" / "favicon.svg").read_bytes()


def install(app: FastAPI) -> None:
    """Mount the bundles and add the pages; `app` is built with docs_url=redoc_url=None."""
    bundles = Path(str(files("fastapi_offline") / "static"))
    app.mount(ASSETS, StaticFiles(directory=bundles), name="docs-assets")
    openapi = app.openapi_url or "/openapi.json"
    redirect = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    swagger = bytes(
        get_swagger_ui_html(
            openapi_url=openapi,
            title=f"{app.title} · API",
            oauth2_redirect_url=redirect,
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=FAVICON,
            # Swagger UI's validator badge is an image from validator.swagger.io.
            swagger_ui_parameters={"validatorUrl": None},
        ).body
    )
    # Swagger UI draws its icons as data: images and calls the API from the page.
    swagger_headers = page_headers(
        scripts=inline_blocks(swagger)[0],
        script_src="'self'",
        style_src="'self'",
        img_src="'self' data:",
        connect_src="'self'",
    )
    oauth2 = bytes(get_swagger_ui_oauth2_redirect_html().body)
    oauth2_headers = page_headers(scripts=inline_blocks(oauth2)[0])
    redoc_page = bytes(
        get_redoc_html(
            openapi_url=openapi,
            title=f"{app.title} · API reference",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=FAVICON,
            with_google_fonts=False,
        ).body
    )
    # ReDoc writes its styles into <style> elements as it renders (styled-components),
    # so style, unlike script, is allowed inline; its search runs in a blob: worker.
    redoc_headers = page_headers(
        script_src="'self'",
        style_src="'self' 'unsafe-inline'",
        img_src="'self' data:",
        connect_src="'self'",
        worker_src="blob:",
    )

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui() -> Response:
        return html(swagger, swagger_headers)

    @app.get(redirect, include_in_schema=False)
    async def swagger_ui_redirect() -> Response:
        return html(oauth2, oauth2_headers)

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> Response:
        return html(redoc_page, redoc_headers)

    async def favicon() -> Response:
        return Response(
            _FAVICON_SVG,
            media_type="image/svg+xml",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    # Browsers ask for /favicon.ico when a page names no icon (the JSON endpoints).
    app.add_api_route(FAVICON, favicon, include_in_schema=False)
    app.add_api_route("/favicon.ico", favicon, include_in_schema=False)
