"""The demo page at `/`, in headless Chromium driven by Playwright, as a person would use it."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.conftest import settings_for
from tests.relay import relay_to
from tests.servers import Running, serve_in_process

NODE = Path(__file__).resolve().parents[1] / "node"


@pytest.fixture(scope="module")
async def paced(database_url: str) -> AsyncIterator[Running]:
    async with serve_in_process(settings_for(database_url, demo_delay_seconds=0.05)) as running:
        yield running


async def test_demo_page_when_tab_closed_mid_answer_then_reopened_page_shows_whole_answer_once(
    paced: Running,
    node_harness: Path,
    tmp_path: Path,
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (.ci/run installs it)"
    shot = tmp_path / "demo.png"
    proc = await asyncio.create_subprocess_exec(
        "node", "browser_demo.mjs", paced.base_url, "th-browser", str(shot),
        cwd=NODE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    result = json.loads(out.decode().strip().splitlines()[-1])
    first, final = result["first"], result["final"]
    assert not any("Dress warmly" in turn for turn in first)  # closed mid-answer
    # One user turn, the two assistant turns, each once (not replayed twice).
    assert [turn.split("\n")[0] for turn in final] == ["USER", "ASSISTANT", "ASSISTANT"]
    text = "\n".join(final)
    assert text.count("Dress warmly") == 1 and "GET_WEATHER" in text.upper()
    assert shot.stat().st_size > 10_000


async def test_demo_page_when_connection_cut_mid_answer_then_says_so_resumes_and_shows_it_once(
    database_url: str, node_harness: Path
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (.ci/run installs it)"
    settings = settings_for(database_url, demo_delay_seconds=0.1)
    async with serve_in_process(settings) as running, relay_to(running.base_url) as relay:
        proc = await asyncio.create_subprocess_exec(
            "node", "browser_resume.mjs", relay.url, "th-resume",
            cwd=NODE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        try:
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line == b"MID\n", line + (await proc.stderr.read() if proc.stderr else b"")
            assert relay.cut() >= 1  # the page's stream, mid-answer
            proc.stdin.write(b"cut\n")
            await proc.stdin.drain()
            out, err = await asyncio.wait_for(proc.communicate(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode == 0, err.decode()[-3000:]
        assert relay.accepted >= 2  # it came back by itself
    result = json.loads(out.decode().strip().splitlines()[-1])
    assert any("resuming after event" in b for b in result["banners"]), result["banners"]
    # The answer as it streamed, across the cut: each piece once, none missing.
    live = result["live"]
    for whole in (
        "You said “Is it cold in Oslo?”. Let me look up the weather in Oslo. ",
        "It is -3 °C and snowing in Oslo ❄️. Dress warmly!",
        '"units": "metric"',
    ):
        assert live.count(whole) == 1, (whole, live)
    assert live.count("Dress warmly") == 1 and live.count("You said") == 1
    final = result["final"]
    roles = [next((r for r in ("user", "assistant") if t.startswith(r)), t) for t in final]
    assert roles == ["user", "assistant", "assistant"]
    assert "".join(final).count("Dress warmly") == 1
