"""Export and import: byte-identical round trips, idempotence, conflicts, every malformed file."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import orjson
import pytest

from agent_replay.audit.cache import thread_messages
from agent_replay.log.chunks import loads
from agent_replay.projector import project
from tests.audit.data import failing
from tests.audit.helpers import (
    fingerprint,
    listing,
    read,
    rechain,
    replay,
    store_thread_at,
    write,
)
from tests.support.pg import Databases

THREAD = "arch-t"


@pytest.fixture(scope="module")
async def stored(database_url: str) -> list[str]:
    return await store_thread_at(database_url, THREAD)


@pytest.fixture
async def empty_url(databases: Databases) -> AsyncIterator[str]:
    url = await databases.clone()
    yield url
    await databases.drop(url)


@pytest.fixture
async def exported(
    database_url: str, stored: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> Path:
    out = tmp_path / "thread.jsonl"
    status, _, err = await replay(
        capsys, "export", "--thread", THREAD, "--out", str(out), "--database-url", database_url
    )
    assert status == 0, err
    return out


async def _aggregates(url: str) -> list[tuple[object, ...]]:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(
            "SELECT run_id, status, last_terminal, tool_names, prompt_tokens, completion_tokens,"
            " total_tokens, error_message, error_code FROM runs ORDER BY run_id"
        )
        return [tuple(r) for r in rows]
    finally:
        await conn.close()


async def test_export_import_export_when_into_empty_database_then_bytes_and_projections_equal(
    database_url: str,
    empty_url: str,
    exported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = await replay(capsys, "import", str(exported), "--database-url", empty_url)
    assert status == 0, err
    assert "3 runs imported" in out
    again = tmp_path / "again.jsonl"
    status, _, err = await replay(
        capsys, "export", "--thread", THREAD, "--out", str(again), "--database-url", empty_url
    )
    assert status == 0, err
    assert read(again) == read(exported)
    # The maintained columns were rebuilt from the events as appends keep them.
    assert await _aggregates(empty_url) == await _aggregates(database_url)
    from agent_replay.archive.commands import log_for

    async with log_for(database_url) as source, log_for(empty_url) as target:
        assert await thread_messages(target, THREAD) == await thread_messages(source, THREAD)


async def test_export_when_chunk_has_lone_surrogate_then_line_holds_the_stored_text(
    database_url: str, stored: list[str], exported: Path
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        # A batch row holds its events' texts joined by newlines (agent_replay.log.rows).
        texts = [text for r in await conn.fetch(
            "SELECT chunk FROM events WHERE run_id = $1 ORDER BY seq", stored[0])
            for text in r["chunk"].split("\n")]  # fmt: skip
    finally:
        await conn.close()
    lines = read(exported).split(b"\n")
    header = orjson.loads(lines[0])
    assert [r["run_id"] for r in header["runs"]] == stored
    assert header["format"] == "agent-replay.export" and header["version"] == 2
    assert header["runs"][0]["input"]["messages"][0]["content"] == "Weather in Paris?"
    assert any("\\ud83d" in t for t in texts)
    for line, text in zip(lines[1:], texts, strict=False):
        assert line.decode().endswith(f',"chunk":{text}}}')


async def test_import_when_same_file_twice_then_second_changes_nothing(
    empty_url: str, exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (await replay(capsys, "import", str(exported), "--database-url", empty_url))[0] == 0
    before = await fingerprint(empty_url)
    status, out, err = await replay(capsys, "import", str(exported), "--database-url", empty_url)
    assert status == 0, err
    assert "0 runs imported" in out and "3 already stored and unchanged" in out
    assert await fingerprint(empty_url) == before


async def test_import_when_stored_run_has_different_events_then_conflict_and_nothing_imported(
    empty_url: str, exported: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The target holds run -b with one chunk changed; the file also brings -a and -c.
    lines = read(exported).split(b"\n")
    header = orjson.loads(lines[0])
    b_run = header["runs"][1]
    b_lines = [line for line in lines[1:] if line.startswith(b'{"run_id":"arch-t-b"')]
    b_lines[2] = b_lines[2].replace(b"Trying the", b"Tried the")
    altered = tmp_path / "altered.jsonl"
    edited = orjson.dumps({**header, "runs": [b_run]}) + b"\n" + b"\n".join(b_lines) + b"\n"
    write(altered, rechain(edited))
    assert (await replay(capsys, "import", str(altered), "--database-url", empty_url))[0] == 0
    before = await fingerprint(empty_url)
    status, _, err = await replay(capsys, "import", str(exported), "--database-url", empty_url)
    assert status == 1
    assert "arch-t-b" in err and "different events (from seq 3)" in err
    assert "nothing was imported" in err
    assert await fingerprint(empty_url) == before


def _rewrite(path: Path, edit: object) -> bytes:
    lines = read(path).split(b"\n")[:-1]
    return edit(lines)  # type: ignore[operator,no-any-return]


def _header_version(lines: list[bytes]) -> bytes:
    header = orjson.loads(lines[0])
    header["version"] = 3
    return b"\n".join([orjson.dumps(header), *lines[1:]]) + b"\n"


MALFORMED = {
    # case: (edit of the exported lines, line number reported, words in the message)
    "truncated_last_line": (
        lambda ls: b"\n".join(ls)[:-7],
        None,
        "ends in the middle of this line",
    ),
    "wrong_format_version": (_header_version, 1, "version 3 is not supported"),
    "seq_gap": (lambda ls: b"\n".join(ls[:3] + ls[4:]) + b"\n", 4, "the line has seq 4"),
    "not_json": (
        lambda ls: b"\n".join([*ls[:2], b"{not json", *ls[3:]]) + b"\n", 3, "not an event line"
    ),
    "chunk_not_json": (
        lambda ls: b"\n".join([*ls[:2], ls[2].replace(b'"type":', b'"type"'), *ls[3:]]) + b"\n",
        3,
        "the chunk is not valid JSON",
    ),
    "blank_line": (lambda ls: b"\n".join([*ls[:2], b"", *ls[2:]]) + b"\n", 3, "a blank line"),
    "cut_at_line_boundary": (lambda ls: b"\n".join(ls[:-1]) + b"\n", None, "truncated?"),
    "not_an_export": (lambda ls: b"\n".join(ls[1:]) + b"\n", 1, "not an export file"),
    "unknown_run": (
        lambda ls: b"\n".join([*ls, ls[-1].replace(b'"arch-t-c"', b'"zzz"')]) + b"\n",
        None,
        "'zzz' is not listed in the header",
    ),
    "chunk_without_type": (
        lambda ls: b"\n".join([*ls[:2], ls[2].replace(b'"type":', b'"kind":'), *ls[3:]]) + b"\n",
        3,
        "not an AG-UI event",
    ),
    "empty": (lambda ls: b"", 1, "empty"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(MALFORMED))
async def test_import_when_file_malformed_then_rejected_with_line_number_and_db_unchanged(
    case: str,
    database_url: str,
    exported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    edit, line, words = MALFORMED[case]
    bad = tmp_path / f"{case}.jsonl"
    # Its hashes written anew: the check named by the case refuses it, not the chain.
    write(bad, rechain(_rewrite(exported, edit)))
    total_lines = len(read(exported).split(b"\n")) - 1
    expected_line = line if line is not None else total_lines + (case == "unknown_run")
    if case == "cut_at_line_boundary":
        expected_line = total_lines
    before = await fingerprint(database_url)
    status, _, err = await replay(capsys, "import", str(bad), "--database-url", database_url)
    assert status == 2
    assert f"line {expected_line}:" in err and words in err, err
    assert await fingerprint(database_url) == before


async def test_export_endpoint_when_run_exported_then_same_bytes_as_cli(
    client: httpx.AsyncClient,
    database_url: str,
    stored: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "run.jsonl"
    status, _, _ = await replay(
        capsys, "export", "--run", stored[0], "--out", str(out), "--database-url", database_url
    )
    assert status == 0
    r = await client.get(f"/v1/runs/{stored[0]}/export")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert r.content == read(out)
    assert loads(r.content.split(b"\n")[0])["runs"][0]["run_id"] == stored[0]
    assert (await client.get("/v1/runs/nope/export")).status_code == 404


async def test_export_when_thread_unknown_then_exit_1_and_no_file(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "none.jsonl"
    status, _, err = await replay(
        capsys, "export", "--thread", "nope", "--out", str(out), "--database-url", database_url
    )
    assert status == 1 and "no run belongs to thread 'nope'" in err
    assert listing(tmp_path) == []


async def test_project_cli_when_given_an_export_then_projects_its_chunks(
    database_url: str, stored: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "one.jsonl"
    args = ("--out", str(out), "--database-url", database_url)
    assert (await replay(capsys, "export", "--run", stored[1], *args))[0] == 0
    status, printed, err = await replay(capsys, "project", str(out))
    assert status == 0, err
    # The run's chunks as they were appended (the thread's second run: `failing`).
    assert loads(printed) == project(failing(stored[1], THREAD))


async def test_import_when_file_predates_error_codes_then_codes_derived_from_events(
    database_url: str,
    empty_url: str,
    exported: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = read(exported).split(b"\n")
    header = orjson.loads(lines[0])
    assert [r["error_code"] for r in header["runs"]] == [None, "upstream_<error>", None]
    for run in header["runs"]:
        del run["error_code"]  # as an export written before runs kept one
    old = tmp_path / "old.jsonl"
    old.write_bytes(b"\n".join([orjson.dumps(header), *lines[1:]]))
    status, _, err = await replay(capsys, "import", str(old), "--database-url", empty_url)
    assert status == 0, err
    assert await _aggregates(empty_url) == await _aggregates(database_url)
    # Exported again, it says the code it was given from its events.
    again = tmp_path / "again.jsonl"
    status, _, err = await replay(
        capsys, "export", "--thread", THREAD, "--out", str(again), "--database-url", empty_url
    )
    assert status == 0, err
    assert read(again) == read(exported)
