"""Transcripts over HTTP: what `agent-replay transcript` writes, for a run and a thread."""

from __future__ import annotations

import httpx


async def _run(client: httpx.AsyncClient, run: str, thread: str, text: str) -> None:
    events = [
        {"type": "RUN_STARTED", "threadId": thread, "runId": run},
        {"type": "TEXT_MESSAGE_START", "messageId": f"{run}-m", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": f"{run}-m", "delta": text},
        {"type": "TEXT_MESSAGE_END", "messageId": f"{run}-m"},
    ]
    r = await client.post(f"/v1/runs/{run}/events", json={"events": events, "close": True})
    assert r.status_code == 200, r.text


async def test_transcript_when_run_then_markdown_html_escaped_and_json(
    client: httpx.AsyncClient,
) -> None:
    await _run(client, "tr-1", "tr-t", "Hello <script>x()</script>")
    md = await client.get("/v1/runs/tr-1/transcript")
    assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown")
    assert "Hello \\<script>x()\\</script>" in md.text  # text in Markdown, never raw HTML
    html = await client.get("/v1/runs/tr-1/transcript", params={"format": "html"})
    assert html.headers["content-type"].startswith("text/html")
    assert "&lt;script&gt;x()&lt;/script&gt;" in html.text and "<script>x()" not in html.text
    js = await client.get("/v1/runs/tr-1/transcript", params={"format": "json"})
    assert "Hello <script>x()</script>" in js.text and js.json()


async def test_transcript_when_thread_then_its_runs_in_order(client: httpx.AsyncClient) -> None:
    await _run(client, "tr-a", "tr-thread", "first answer")
    await _run(client, "tr-b", "tr-thread", "second answer")
    text = (await client.get("/v1/threads/tr-thread/transcript")).text
    assert text.index("first answer") < text.index("second answer")


async def test_transcript_when_missing_or_bad_format_then_clear_errors(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/v1/runs/tr-none/transcript")
    assert r.status_code == 404 and r.json()["error"]["code"] == "run_not_found"
    r = await client.get("/v1/threads/tr-none/transcript")
    assert r.status_code == 404 and r.json()["error"]["code"] == "thread_not_found"
    await _run(client, "tr-2", "tr-t2", "x")
    r = await client.get("/v1/runs/tr-2/transcript", params={"format": "pdf"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
