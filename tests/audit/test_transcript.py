"""Transcripts of a run with every part type, in all three formats, from a file with
no database; the HTML looked at in headless Chromium."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from agent_replay.archive.commands import log_for
from agent_replay.audit.cache import thread_messages
from agent_replay.log import EventLog
from agent_replay.log.chunks import loads
from tests.audit.data import every_part, failing, run_input
from tests.audit.helpers import store

THREAD = "tr-t"
USER, ASSISTANT, RUN_ERROR = (37, 99, 235), (22, 163, 74), (220, 38, 38)
SUMMARY, REASONING_BODY = (253, 230, 138), (168, 85, 247)
# Points nowhere: a transcript of a file must not need it.
NO_DATABASE = "postgresql://nobody@127.0.0.1:9/none"


@pytest.fixture(scope="module")
async def export_file(database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    log = await EventLog.open(database_url)
    try:
        await store(log, "tr-a", every_part("tr-a", THREAD), thread_id=THREAD, agent="weather",
                    input=run_input("tr-a", THREAD, "Weather in Paris?"))  # fmt: skip
        await store(log, "tr-b", failing("tr-b", THREAD), thread_id=THREAD,
                    input=run_input("tr-b", THREAD, "Again <please>", history=1))  # fmt: skip
    finally:
        await log.close()
    out = tmp_path_factory.mktemp("transcript") / "thread.jsonl"
    status = await asyncio.to_thread(
        __import__("agent_replay.cli", fromlist=["main"]).main,
        ["export", "--thread", THREAD, "--out", str(out), "--database-url", database_url],
    )
    assert status == 0
    return out


def transcript_without_database(export: Path, fmt: str) -> str:
    """`agent-replay transcript FILE` in its own process, with the database unreachable."""
    done = subprocess.run(
        [sys.executable, "-m", "agent_replay.cli", "transcript", str(export), "--format", fmt],
        env={**os.environ, "REPLAY_DATABASE_URL": NO_DATABASE},
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode("utf-8")


@pytest.fixture(scope="module")
async def rendered(export_file: Path) -> dict[str, str]:
    formats = ("markdown", "json", "html")
    texts = await asyncio.gather(
        *(asyncio.to_thread(transcript_without_database, export_file, f) for f in formats)
    )
    return dict(zip(formats, texts, strict=True))


async def test_transcript_json_when_from_file_then_turns_equal_the_thread_messages(
    rendered: dict[str, str], database_url: str
) -> None:
    document = loads(rendered["json"])
    async with log_for(database_url) as log:
        messages = await thread_messages(log, THREAD)
    assert [t["message"] for t in document["turns"] if "message" in t] == messages
    assert document["turns"][-1] == {
        "run_id": "tr-b",
        "time": document["runs"][1]["closed_at"],
        "error": "upstream exploded <b>&</b>",
        "error_code": "upstream_<error>",
    }
    assert all(t["time"] for t in document["turns"])


def test_transcript_markdown_when_every_part_then_each_shown_in_order(
    rendered: dict[str, str],
) -> None:
    text = rendered["markdown"]
    headings = re.findall(r"^### (\w[\w ]*) · (\d{4}-\d\d-\d\d [\d:.]+ UTC) · run", text, re.M)
    assert [h[0] for h in headings] == [
        "User", "User", "Assistant", "Assistant", "User", "Assistant", "Run error",
    ]  # fmt: skip
    in_order = [
        "Weather in Paris?",
        "> SECRET-REASONING think \\<b>hard\\</b>",  # no raw HTML: `<` escaped
        "**Tool call** `get_weather` · complete",
        '```json\n{\n  "city": "Paris",\n  "units": "metric"\n}\n```',
        "**Tool result for** `c1` · complete",
        '"temp": 21',
        "**UI resource from** `get_weather`",
        "**Tool call** `delete_file` · approval-requested",
        "pending (request appr-1)",
        "**Tool result for** `c3` · error",
        "**Error:** timed out",
        "**Structured output** · complete",
        '"verdict": "sunny"',
        "Again \\<please>",
        "upstream exploded \\<b>&\\</b> (code upstream_\\<error>)",
    ]
    # The runs table shows the code the run ended in with its status.
    assert "| error (upstream_\\<error>) |" in text
    body = text[text.index("\n### ") :]  # after the runs table
    at = 0
    for piece in in_order:
        found = body.find(piece, at)
        assert found >= 0, f"{piece!r} missing or out of order"
        at = found + len(piece)


def test_transcript_html_when_content_has_markup_then_escaped_and_self_contained(
    rendered: dict[str, str],
) -> None:
    page = rendered["html"]
    assert "&lt;script&gt;x&lt;/script&gt;" in page and "<script" not in page
    assert "think &lt;b&gt;hard&lt;/b&gt;" in page and "Again &lt;please&gt;" in page
    assert "upstream exploded &lt;b&gt;&amp;&lt;/b&gt; (code upstream_&lt;error&gt;)" in page
    # The runs table shows the code with the status.
    assert "<td>error (upstream_&lt;error&gt;)</td>" in page
    # Nothing to fetch: no scripts, stylesheets, images or frames.
    assert not re.search(r"<(script|link|img|iframe)\b|\bsrc=|url\(", page)
    assert page.count('<details class="reasoning">') == 1


def screenshot(chromium: str, page: Path, png: Path) -> Image.Image:
    subprocess.run(
        [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--force-color-profile=srgb", "--hide-scrollbars", "--window-size=1000,4000",
            f"--screenshot={png}", page.as_uri(),
        ],
        capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    return Image.open(png).convert("RGB")


def bands(
    image: Image.Image, colors: dict[tuple[int, int, int], str]
) -> list[tuple[str, int, int]]:
    """Vertical runs of rows showing a solid stretch (6 px) of one of `colors`."""
    found: list[tuple[str, int, int]] = []
    width, height = image.size
    patterns = {bytes(c) * 6: name for c, name in colors.items()}
    for y in range(height):
        row = image.crop((0, y, width, y + 1)).tobytes()
        hit = next((name for p, name in patterns.items() if p in row), None)
        if hit is None:
            continue
        if found and found[-1][0] == hit and found[-1][2] == y - 1:
            found[-1] = (hit, found[-1][1], y)
        else:
            found.append((hit, y, y))
    return found


async def test_transcript_html_in_chromium_then_turns_visible_in_order_and_reasoning_collapsed(
    rendered: dict[str, str], tmp_path: Path, chromium: str
) -> None:
    page = tmp_path / "transcript.html"
    page.write_text(rendered["html"], encoding="utf-8")
    image = await asyncio.to_thread(screenshot, chromium, page, tmp_path / "shot.png")
    turns = bands(image, {USER: "user", ASSISTANT: "assistant", RUN_ERROR: "run-error"})
    document: dict[str, Any] = loads(rendered["json"])
    expected = [t["message"]["role"] if "message" in t else "run-error" for t in document["turns"]]
    assert [name for name, _, _ in turns] == expected
    assert all(bottom - top > 20 for _, top, bottom in turns)  # whole turns, not stray pixels
    assert turns[-1][2] < image.size[1] - 50  # the page ended inside the window
    marks = bands(image, {SUMMARY: "summary", REASONING_BODY: "reasoning"})
    assert [name for name, _, _ in marks] == ["summary"]  # shown, but collapsed


def test_transcript_tool_call_when_arguments_cut_mid_stream_then_fields_that_arrived_shown() -> (
    None
):
    from agent_replay.projector import project
    from agent_replay.transcript.blocks import blocks

    chunks = [
        {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
        {"type": "TOOL_CALL_START", "toolCallId": "c", "toolCallName": "write_file"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": '{"path": "notes.md", "cont'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c", "delta": 'ent": "# Tit'},
        {"type": "RUN_ERROR", "message": "cancelled"},
    ]
    messages = project(chunks, finalize=False)
    shown = blocks(messages[0], shown_results=set(), call_times={}, result_times={})
    call = next(b for b in shown if b.kind == "tool-call")
    section = call.sections[0]
    assert section.label is not None and "incomplete" in section.label
    assert section.text == '{\n  "path": "notes.md",\n  "content": "# Tit"\n}'
