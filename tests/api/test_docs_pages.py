"""/docs and /redoc load everything from the service itself: no URL off the service in any
src or href, and every one they name is served here."""

from __future__ import annotations

from html.parser import HTMLParser

import httpx
import pytest


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]


def _links(html: str) -> list[str]:
    parser = _Links()
    parser.feed(html)
    return parser.urls


KINDS = {".js": "javascript", ".css": "text/css", ".svg": "image/svg+xml"}


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/"])
async def test_page_when_loaded_then_every_asset_is_served_by_the_service(
    client: httpx.AsyncClient, page: str
) -> None:
    r = await client.get(page)
    assert r.status_code == 200
    urls = _links(r.text)
    assert urls
    offsite = [u for u in urls if u.startswith(("http://", "https://", "//"))]
    assert offsite == []
    for url in urls:
        if url.startswith("#"):
            continue
        asset = await client.get(url)
        assert asset.status_code == 200, url
        kind = next((k for suffix, k in KINDS.items() if url.endswith(suffix)), "")
        assert kind in asset.headers["content-type"], (url, asset.headers["content-type"])


async def test_docs_when_loaded_then_both_name_the_favicon_and_the_openapi_document(
    client: httpx.AsyncClient,
) -> None:
    for page in ("/docs", "/redoc"):
        html = (await client.get(page)).text
        assert "/favicon.svg" in _links(html)
        assert "/openapi.json" in html
    assert (await client.get("/openapi.json")).json()["info"]["title"] == "agent-replay"


async def test_favicon_ico_when_asked_then_the_icon(client: httpx.AsyncClient) -> None:
    r = await client.get("/favicon.ico")
    assert r.status_code == 200
    assert r.headers["content-type"] == "image/svg+xml"
    assert r.content.startswith(b"<svg")
