"""The demo page at `/`, in headless Chromium driven by Playwright, as a person would use it."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import settings_for
from tests.support.nodejs import cut_on_cue
from tests.support.relay import relay_to
from tests.support.servers import Running, serve_in_process, serve_subprocess

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
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
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
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
    settings = settings_for(database_url, demo_delay_seconds=0.1)
    async with serve_in_process(settings) as running, relay_to(running.base_url) as relay:
        out, _ = await cut_on_cue(
            NODE, "browser_resume.mjs", relay.url, "th-resume", relay=relay, cue=b"MID\n",
            wait_cue=60,
        )  # fmt: skip
        assert relay.accepted >= 2  # it came back by itself
    result = json.loads(out.strip().splitlines()[-1])
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


async def test_demo_page_when_keys_set_and_token_expired_at_reconnect_then_fresh_token_resumes_once(
    database_url: str, node_harness: Path
) -> None:
    assert shutil.which("chromium"), "the browser test needs Chromium (ops/test installs it)"
    env = {
        "REPLAY_DATABASE_URL": database_url,
        "REPLAY_API_KEYS": "k-demo-admin, k-demo-read:read",
        "REPLAY_TOKEN_SECRET": "demo-token-secret-0123456789abcdef-0123456789",
        # Short enough to expire twice mid-answer; the answer streams for 18 s or more.
        "REPLAY_TOKEN_TTL_SECONDS": "2",
        "REPLAY_DEMO_DELAY_SECONDS": "0.7",
    }
    thread = "th-tokens"
    with serve_subprocess(env) as (base, _):
        async with relay_to(base) as relay:
            # Each cue: the page's stream is mid-answer and its token has expired.
            out, _ = await cut_on_cue(
                NODE, "browser_tokens.mjs", relay.url, thread, "k-demo-admin",
                relay=relay, cue=b"EXPIRED\n", cuts=2,
            )  # fmt: skip
        async with httpx.AsyncClient(base_url=base) as http:
            stored = await http.get(
                f"/v1/threads/{thread}/messages", headers={"Authorization": "Bearer k-demo-read"}
            )
    result = json.loads(out.strip().splitlines()[-1])
    requests = result["requests"]
    tokens = result["tokens"]  # the page's token before each cut
    # Asked once, and what the tab keeps is the token for its thread, never the key.
    assert result["asked"] == 1 and result["keyFormShown"] == 0
    assert "k-demo-admin" not in json.dumps(result["storage"])
    assert result["storage"]["local"] == {}
    newest = [r["token"] for r in requests if r["token"]][-1]
    assert result["storage"]["session"] == {f"agent-replay-demo-token:{thread}": newest}
    assert len(set(tokens)) == 2 and all(t.count(".") == 2 for t in tokens)
    # Before the first cut: the run streamed to the page with its first token, on past its
    # expiry (the page saw events after the service refused that token).
    before = [r for r in requests if r["phase"] == "before"]
    assert [r["status"] for r in before if r["kind"] == "mint"] == [201]
    streams = [r for r in before if r["kind"] == "stream"]
    assert [(r["method"], r["status"], r["token"]) for r in streams] == [("POST", 200, tokens[0])]
    # After each cut: the reconnect's expired token is refused (401 token_expired), one fresh
    # token is minted, and one stream resumes with it; the first cut's with an EventSource
    # carrying the fresh token in ?token=, the second's after that EventSource's own
    # reconnect was refused. (The last token expires too before the page re-reads the
    # thread at the end: another 401, another token.)
    cases = (("after", tokens[0], tokens[1]), ("after2", tokens[1], None))
    for phase, expired, resumed_by in cases:
        after = [r for r in requests if r["phase"] == phase]
        resumed = [r for r in after if r["kind"] == "stream" and r["status"] == 200]
        assert len(resumed) == 1, after
        assert resumed[0]["method"] == "GET", after
        assert all(r["status"] in (200, 401) for r in after if r["kind"] == "stream"), after
        upto = after[: after.index(resumed[0])]
        assert [r["status"] for r in upto if r["kind"] == "mint"] == [201], after
        refused = [r for r in upto if r["status"] == 401]
        assert refused and all(r["token"] == expired for r in refused), after
        assert all(r["code"] in (None, "token_expired") for r in after), after
        fresh = resumed[0]["token"]
        assert fresh not in tokens[: tokens.index(expired) + 1], after
        if resumed_by is not None:
            assert fresh == resumed_by
            assert "token_expired" in {r["code"] for r in refused}, after
        else:
            # The EventSource came back by itself with its URL's token and was refused.
            assert any(r["kind"] == "stream" for r in refused), after
        mint_at = next(i for i, r in enumerate(after) if r["kind"] == "mint")
        assert all(r["token"] != expired for r in after[mint_at + 1 :]), after
    # The answer as it streamed across the cuts, each piece once; the thread as stored agrees.
    live = result["live"]
    for whole in (
        "You said “Is it cold in Oslo?”. Let me look up the weather in Oslo. ",
        "It is -3 °C and snowing in Oslo ❄️. Dress warmly!",
        '"units": "metric"',
    ):
        assert live.count(whole) == 1, (whole, live)
    final = result["final"]
    roles = [next((r for r in ("user", "assistant") if t.startswith(r)), t) for t in final]
    assert roles == ["user", "assistant", "assistant"]
    assert "".join(final).count("Dress warmly") == 1
    assert stored.status_code == 200 and stored.text.count("Dress warmly") == 1
