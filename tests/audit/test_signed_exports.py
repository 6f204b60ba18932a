"""Exports that carry the chain, signed with keys made by openssl: verify, import, the script.

The chain each line carries is compared with one PostgreSQL computes from the stored rows;
signatures are checked by `openssl pkeyutl` as the manual says to; the auditor's script in
the manual (docs/audit/verify_export.py) runs as a subprocess and must name the same line as
`agent-replay verify` on every case.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import itertools
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_replay.archive.commands import export_to, log_for
from agent_replay.archive.dump import check_chains, export_bytes, run_records
from agent_replay.archive.signing import Signer, private_key, public_key
from agent_replay.archive.verify import verify_file
from agent_replay.errors import RunAltered
from tests.audit.helpers import fingerprint, read, rechain, replay, store_thread_at, write
from tests.support.pg import Databases

THREAD = "signed-t"
SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "audit" / "verify_export.py"

# A run's chain computed by PostgreSQL from the rows as stored (a batch row's events are its
# chunk's lines, the last numbered the row's seq): (seq, hash) for every event.
CHAIN_SQL = r"""
WITH RECURSIVE ev AS (
    SELECT e.seq - e.n + u.i AS seq, u.part AS chunk
    FROM events e, unnest(string_to_array(e.chunk, E'\n')) WITH ORDINALITY AS u(part, i)
    WHERE e.run_id = $1
), chain(seq, h) AS (
    SELECT 0::bigint, decode(repeat('00', 32), 'hex')
    UNION ALL
    SELECT ev.seq, sha256(chain.h || int8send(ev.seq) || convert_to(ev.chunk, 'UTF8'))
    FROM chain JOIN ev ON ev.seq = chain.seq + 1
)
SELECT seq, encode(h, 'hex') AS h FROM chain WHERE seq > 0 ORDER BY seq
"""


def _openssl(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["openssl", *args], capture_output=True, timeout=60, check=False)


def _key_pair(directory: Path, name: str) -> tuple[Path, Path]:
    private, public = directory / f"{name}.pem", directory / f"{name}.pub.pem"
    assert _openssl("genpkey", "-algorithm", "ed25519", "-out", str(private)).returncode == 0
    assert _openssl("pkey", "-in", str(private), "-pubout", "-out", str(public)).returncode == 0
    return private, public


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    directory = tmp_path_factory.mktemp("keys")
    return {name: _key_pair(directory, name) for name in ("ours", "theirs")}


@pytest.fixture(scope="module")
async def stored(database_url: str) -> list[str]:
    return await store_thread_at(database_url, THREAD)


@pytest.fixture
async def signed(
    database_url: str,
    stored: list[str],
    keys: dict[str, tuple[Path, Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> Path:
    out = tmp_path / "signed.jsonl"
    status, _, err = await replay(capsys, "export", "--thread", THREAD, "--out", str(out),
                                  "--sign-key", str(keys["ours"][0]),
                                  "--database-url", database_url)  # fmt: skip
    assert status == 0, err
    return out


def _lines(path: Path) -> list[bytes]:
    return read(path).split(b"\n")[:-1]


def _joined(lines: list[bytes]) -> bytes:
    return b"\n".join(lines) + b"\n"


def _event_line_numbers(path: Path) -> list[int]:
    return [i + 1 for i, line in enumerate(_lines(path)) if line.startswith(b'{"run_id":')]


def _altered_line(stderr: str) -> int | None:
    found = re.search(r"line (\d+)", stderr)
    return None if found is None else int(found.group(1))


async def _verify(
    capsys: pytest.CaptureFixture[str], path: Path, key: Path | None = None
) -> tuple[int, str, str]:
    args = ["verify", str(path)] + ([] if key is None else ["--public-key", str(key)])
    return await replay(capsys, *args)


def _script(path: Path, key: Path | None = None) -> tuple[int, str, str]:
    args = [sys.executable, str(SCRIPT), str(path)]
    if key is not None:
        args += ["--public-key", str(key)]
    done = subprocess.run(args, capture_output=True, timeout=60, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


async def test_export_when_stored_in_both_layouts_then_each_line_hash_is_postgres_chain(
    database_url: str, stored: list[str], signed: Path
) -> None:
    conn = await asyncpg.connect(database_url)
    try:
        batched = await conn.fetchval("SELECT count(*) FROM events WHERE n > 1")
        expected = {
            (run_id, r["seq"]): r["h"]
            for run_id in stored
            for r in await conn.fetch(CHAIN_SQL, run_id)
        }
    finally:
        await conn.close()
    assert batched > 0  # the thread's first run is stored in batch rows, the others a row each
    carried = {
        (line["run_id"], line["seq"]): line["hash"]
        for line in map(json.loads, _lines(signed)[1:-1])
    }
    assert carried == expected


async def test_verify_when_export_intact_then_exit_0_with_each_run_head(
    signed: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = await _verify(capsys, signed, keys["ours"][1])
    assert status == 0, err
    assert "intact: 3 runs" in out and "signature valid" in out
    lines = [json.loads(line) for line in _lines(signed)[1:-1]]
    last = {line["run_id"]: line["hash"] for line in lines}
    for run_id, head in last.items():
        assert f"run {run_id}: " in out and f"head {head}" in out


async def test_verify_when_one_chunk_byte_edited_then_exit_1_naming_that_line(
    signed: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines(signed)
    number = _event_line_numbers(signed)[4]
    lines[number - 1] = lines[number - 1].replace(b'"type":"', b'"type":"X', 1)
    write(signed, _joined(lines))
    for key in (None, keys["ours"][1]):
        status, _, err = await _verify(capsys, signed, key)
        assert status == 1
        assert _altered_line(err) == number and "chain broken at run" in err, err


async def test_verify_when_another_key_given_then_exit_1_signed_by_another_key(
    signed: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = await _verify(capsys, signed, keys["theirs"][1])
    assert status == 1
    assert "signed by another key" in err and _altered_line(err) == len(_lines(signed))


async def test_verify_when_rechained_and_digest_rewritten_then_only_the_key_catches_it(
    signed: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Whoever edits a chunk can write every hash and the digest anew; not the signature.
    lines = _lines(signed)
    number = _event_line_numbers(signed)[2]
    lines[number - 1] = lines[number - 1].replace(b'"type":"', b'"type":"X', 1)
    body = rechain(_joined(lines[:-1]))
    signature = orjson.loads(lines[-1])
    signature["signature"]["sha256"] = hashlib.sha256(body).hexdigest()
    write(signed, body + orjson.dumps(signature) + b"\n")
    assert (await _verify(capsys, signed))[0] == 0
    status, _, err = await _verify(capsys, signed, keys["ours"][1])
    assert status == 1 and "signature invalid" in err, err


async def test_verify_when_unsigned_file_and_key_given_then_exit_1(
    signed: Path, keys: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    write(signed, _joined(_lines(signed)[:-1]))
    assert (await _verify(capsys, signed))[0] == 0
    status, _, err = await _verify(capsys, signed, keys["ours"][1])
    assert status == 1 and "unsigned but a key was given" in err, err


async def test_verify_when_not_an_export_or_version_1_then_exit_3(
    signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other.jsonl"
    write(other, b'{"type":"RUN_STARTED"}\n')
    assert (await _verify(capsys, other))[0] == 3
    header = orjson.loads(_lines(signed)[0])
    write(other, orjson.dumps({**header, "version": 1}) + b"\n")
    status, _, err = await _verify(capsys, other)
    assert status == 3 and "no hash chain" in err
    assert (await _verify(capsys, tmp_path / "missing.jsonl"))[0] == 3


async def test_verify_when_public_key_is_not_ed25519_then_exit_2_before_reading_the_file(
    signed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ec_key, ec_public = tmp_path / "ec.pem", tmp_path / "ec.pub.pem"
    made = _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
                    "-out", str(ec_key))  # fmt: skip
    assert made.returncode == 0
    assert _openssl("pkey", "-in", str(ec_key), "-pubout", "-out", str(ec_public)).returncode == 0
    status, _, err = await _verify(capsys, signed, ec_public)
    assert status == 2 and "not an Ed25519 public key" in err
    status, _, err = await replay(capsys, "export", "--thread", THREAD, "--sign-key", str(ec_key))
    assert status == 2 and "not an Ed25519 key" in err


async def test_openssl_when_given_the_documented_digest_then_verifies_the_signature(
    signed: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    data = read(signed)
    start = data.rstrip(b"\n").rfind(b"\n") + 1
    fields = orjson.loads(data[start:])["signature"]
    sig = tmp_path / "sig.bin"
    write(sig, base64.b64decode(fields["value"]))
    digest = tmp_path / "digest.bin"
    edited = bytearray(data[:start])
    edited[start // 2] ^= 1  # one bit of one byte
    for body, verified in ((data[:start], True), (bytes(edited), False)):
        write(digest, hashlib.sha256(body).digest())
        done = _openssl("pkeyutl", "-verify", "-pubin", "-inkey", str(keys["ours"][1]), "-rawin",
                        "-in", str(digest), "-sigfile", str(sig))  # fmt: skip
        assert (done.returncode == 0) is verified, done.stderr
    der = _openssl("pkey", "-pubin", "-in", str(keys["ours"][1]), "-outform", "DER").stdout
    assert fields["public_key_sha256"] == hashlib.sha256(der).hexdigest()


def _one_byte_edited(line: bytes) -> bytes:
    """The line with the first letter of its chunk's type in the other case: one byte."""
    at = line.index(b'"chunk":')
    at = line.index(b'"type":"', at) + len(b'"type":"')
    return line[:at] + bytes([line[at] ^ 0x20]) + line[at + 1 :]


def _cases(lines: list[bytes]) -> dict[str, tuple[bytes, int | None]]:
    """Edits of a signed export, each with the line it is altered at (None: intact)."""
    runs = [json.loads(line)["run_id"] for line in lines[1:-1]]
    second = runs.index(runs[-1]) + 1  # the line before the last run's first event
    middle = 4  # an event of the first run with another of it after
    last = len(lines) - 1  # the last event (before the signature line)
    swapped = [*lines[: middle - 1], lines[middle], lines[middle - 1], *lines[middle + 1 :]]
    boundary = [*lines[: second - 1], lines[second], lines[second - 1], *lines[second + 1 :]]
    edited = list(lines)
    edited[middle - 1] = _one_byte_edited(lines[middle - 1])
    return {
        "intact": (_joined(lines), None),
        "one_byte_edited_in_a_chunk": (_joined(edited), middle),
        "line_removed": (_joined(lines[: middle - 1] + lines[middle:]), middle),
        "two_lines_swapped": (_joined(swapped), middle),
        "two_lines_swapped_across_runs": (_joined(boundary), second),
        "line_added": (_joined([*lines[:middle], lines[middle - 1], *lines[middle:]]), middle + 1),
        "tail_truncated_in_a_line": (_joined(lines[: last - 1]) + lines[last - 1][:60], last),
        "tail_truncated_at_a_line": (_joined(lines[: last - 1]), last),
    }


CASES = [
    "intact",
    "one_byte_edited_in_a_chunk",
    "line_removed",
    "two_lines_swapped",
    "two_lines_swapped_across_runs",
    "line_added",
    "tail_truncated_in_a_line",
    "tail_truncated_at_a_line",
    "wrong_key",
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("with_key", [False, True])
async def test_auditor_script_when_file_edited_then_agrees_with_verify_on_exit_and_line(
    case: str,
    with_key: bool,
    signed: Path,
    keys: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines = _lines(signed)
    key = keys["theirs" if case == "wrong_key" else "ours"][1] if with_key else None
    if case == "wrong_key":
        # Without the key nothing says whose signature it is: the file is intact.
        edited, expected = _joined(lines), (len(lines) if with_key else None)
    else:
        edited, expected = _cases(lines)[case]
    write(signed, edited)
    status, _, err = await _verify(capsys, signed, key)
    assert status == (0 if expected is None else 1), err
    assert _altered_line(err) == expected, err
    script_status, _, script_err = await asyncio.to_thread(_script, signed, key)
    assert (script_status, _altered_line(script_err)) == (status, expected), script_err


@pytest.fixture
async def empty_url(databases: Databases) -> AsyncIterator[str]:
    url = await databases.clone()
    yield url
    await databases.drop(url)


def _chunk_edited(lines: list[bytes], number: int) -> bytes:
    edited = list(lines)
    edited[number - 1] = _one_byte_edited(lines[number - 1])
    return _joined(edited)


async def test_import_when_chain_broken_then_refused_naming_the_line_and_nothing_stored(
    signed: Path, empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines(signed)
    # The last run's event: the runs before it are whole, and still none of them is stored.
    number = len(lines) - 1
    write(signed, _chunk_edited(lines, number))
    before = await fingerprint(empty_url)
    status, _, err = await replay(capsys, "import", str(signed), "--database-url", empty_url)
    assert status == 2
    assert f"line {number}: chain broken at run 'signed-t-c' seq " in err, err
    assert await fingerprint(empty_url) == before


async def test_import_when_content_differs_from_its_signed_digest_then_refused(
    signed: Path, empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines(signed)
    header = json.loads(lines[0])
    header["runs"][0]["metadata"] = {"user": "mallory"}  # the header: outside the chain
    write(signed, _joined([json.dumps(header, separators=(",", ":")).encode(), *lines[1:]]))
    before = await fingerprint(empty_url)
    status, _, err = await replay(capsys, "import", str(signed), "--database-url", empty_url)
    assert status == 2 and f"line {len(lines)}: " in err and "altered after signing" in err, err
    assert await fingerprint(empty_url) == before


async def test_import_when_signed_then_stored_and_exported_again_byte_for_byte(
    signed: Path,
    empty_url: str,
    keys: dict[str, tuple[Path, Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = await replay(capsys, "import", str(signed), "--database-url", empty_url)
    assert status == 0, err
    assert "3 runs imported" in out and "chain checked" in out
    again = tmp_path / "again.jsonl"
    status, _, err = await replay(capsys, "export", "--thread", THREAD, "--out", str(again),
                                  "--sign-key", str(keys["ours"][0]),
                                  "--database-url", empty_url)  # fmt: skip
    assert status == 0, err
    assert read(again) == read(signed)


async def test_import_when_version_1_file_then_imported_and_reported_unchained(
    signed: Path, empty_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = _lines(signed)
    header = json.loads(lines[0])
    header["version"] = 1
    # A version 1 line: the same fields without the hash; no signature line.
    old = [re.sub(rb',"hash":"[0-9a-f]{64}"', b"", line) for line in lines[1:-1]]
    write(signed, _joined([json.dumps(header).encode(), *old]))
    status, out, err = await replay(capsys, "import", str(signed), "--database-url", empty_url)
    assert status == 0, err
    assert "3 runs imported" in out and "unchained" in out


async def test_project_when_given_a_signed_export_then_the_signature_line_is_no_chunk(
    signed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, printed, err = await replay(capsys, "project", str(signed))
    write(signed, _joined(_lines(signed)[:-1]))
    assert status == 0, err
    assert (await replay(capsys, "project", str(signed)))[1] == printed


async def test_export_when_a_stored_chunk_was_changed_by_sql_then_run_altered_before_any_byte(
    database_url: str, stored: list[str], tmp_path: Path
) -> None:
    run_id = stored[1]
    async with log_for(database_url) as log:
        records = await run_records(log, run_id=run_id)
        await check_chains(log, records)  # intact: nothing raised
    conn = await asyncpg.connect(database_url)
    try:
        # The first row's first chunk changed behind the service's back (restored after).
        seq, chunk = await conn.fetchrow(
            "SELECT seq, chunk FROM events WHERE run_id = $1 ORDER BY seq LIMIT 1",
            run_id,
        )
        await conn.execute(
            "UPDATE events SET chunk = $3 WHERE run_id = $1 AND seq = $2",
            run_id,
            seq,
            chunk.replace("}", ',"x":1}', 1),
        )
        try:
            async with log_for(database_url) as log:
                with pytest.raises(RunAltered, match=run_id):
                    await check_chains(log, await run_records(log, run_id=run_id))
            out = tmp_path / "altered.jsonl"
            with pytest.raises(RunAltered, match=run_id):
                await export_to(database_url, run_id=run_id, thread_id=None, out=out)
            assert not out.exists()
        finally:
            await conn.execute(
                "UPDATE events SET chunk = $3 WHERE run_id = $1 AND seq = $2", run_id, seq, chunk
            )
    finally:
        await conn.close()


# -- random runs, random edits -------------------------------------------------------------

_RUNS = itertools.count()
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _chunks(run_id: str, deltas: list[str]) -> list[dict[str, object]]:
    message = f"{run_id}-m"
    return [
        {"type": "RUN_STARTED", "threadId": "hyp", "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": message, "role": "assistant"},
        *({"type": "TEXT_MESSAGE_CONTENT", "messageId": message, "delta": d} for d in deltas),
    ]


async def _store_and_export(url: str, runs: list[tuple[list[str], list[int]]]) -> bytes:
    """Each run appended in groups of the given sizes (4 or more: batch rows), exported."""
    async with log_for(url) as log:
        records = []
        for deltas, sizes in runs:
            run_id = f"hyp-{next(_RUNS)}"
            await log.create_run(run_id, thread_id="hyp")
            chunks = _chunks(run_id, deltas)
            start = 0
            for size in itertools.cycle(sizes):
                if start >= len(chunks):
                    break
                await log.append(run_id, chunks[start : start + size])
                start += size
            records.extend(await run_records(log, run_id=run_id))
        return await export_bytes(log, records)


def _spans(data: bytes) -> list[tuple[int, list[int]]]:
    """(line number, offsets) of each event line's bytes the chain covers: the seq's digits,
    and the hash and chunk (from `"hash":"` to the line's end)."""
    spans, offset = [], 0
    for number, line in enumerate(data.split(b"\n"), start=1):
        if line.startswith(b'{"run_id":'):
            seq = line.index(b'"seq":') + 6
            digits = range(offset + seq, offset + line.index(b",", seq))
            chained = range(offset + line.index(b'"hash":"'), offset + len(line))
            spans.append((number, [*digits, *chained]))
        offset += len(line) + 1
    return spans


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(
        st.tuples(
            st.lists(_TEXT, min_size=1, max_size=12),
            st.lists(st.integers(1, 8), min_size=1, max_size=3),
        ),
        min_size=1,
        max_size=3,
    ),
    data=st.data(),
)
def test_random_runs_when_one_byte_or_line_edited_then_verify_names_the_edited_line(
    database_url: str,
    keys: dict[str, tuple[Path, Path]],
    runs: list[tuple[list[str], list[int]]],
    data: st.DataObject,
) -> None:
    unsigned = asyncio.run(_store_and_export(database_url, runs))
    signer = Signer(private_key(read(keys["ours"][0])))
    signed = signer.update(unsigned) + signer.line()
    key = public_key(read(keys["ours"][1]))
    assert verify_file(unsigned).status == "intact"
    assert verify_file(signed, key).status == "intact"
    spans = _spans(unsigned)
    lines = unsigned.split(b"\n")[:-1]

    # One byte of a line's seq, hash or chunk: that line, signed or not.
    # Drawn as a place and a change, not offsets: run ids and times, so lengths, differ
    # from one try of an example to the next.
    number, offsets = data.draw(st.sampled_from(spans))
    at = offsets[data.draw(st.integers(0, 10**6)) % len(offsets)]
    flip = data.draw(st.integers(1, 255))
    for file, given_key in ((unsigned, None), (signed, key)):
        edited = file[:at] + bytes([file[at] ^ flip]) + file[at + 1 :]
        verdict = verify_file(edited, given_key)
        assert (verdict.status, verdict.line) == ("altered", number), verdict.reason

    # A line removed, repeated, or swapped with the next: that line (the copy, for a repeat).
    number = data.draw(st.sampled_from([n for n, _ in spans]))
    index = number - 1
    removed = lines[:index] + lines[index + 1 :]
    repeated = [*lines[: index + 1], lines[index], *lines[index + 1 :]]
    edits = [(removed, number), (repeated, number + 1)]
    if index + 1 < len(lines) and lines[index + 1] != lines[index]:
        swapped = [*lines[:index], lines[index + 1], lines[index], *lines[index + 2 :]]
        edits.append((swapped, number))
    for edited_lines, expected in edits:
        verdict = verify_file(_joined(edited_lines))
        assert (verdict.status, verdict.line) == ("altered", expected), verdict.reason

    # Any byte of the signed file, the header, times and signature line included: not intact.
    at = data.draw(st.integers(0, 10**6)) % len(signed)
    flip = data.draw(st.integers(1, 255))
    verdict = verify_file(signed[:at] + bytes([signed[at] ^ flip]) + signed[at + 1 :], key)
    assert verdict.status != "intact", (at, flip, signed[at - 20 : at + 20])


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "signed-exports.md"


async def test_manual_openssl_commands_when_run_on_a_signed_export_then_verified_or_refused(
    signed: Path, keys: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    # The guide's shell lines as written, on its file names.
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split("By hand, with `openssl` alone")[1].split("```sh\n")[1].split("```")[0]
    work = tmp_path / "by-hand"
    work.mkdir()
    write(work / "export-key.pub.pem", read(keys["ours"][1]))
    for data, verified in ((read(signed), True), (_chunk_edited(_lines(signed), 3), False)):
        write(work / "t-1.jsonl", data)
        done = await asyncio.to_thread(
            subprocess.run, ["bash", "-ec", block], cwd=work, capture_output=True, timeout=60
        )
        assert (done.returncode == 0) is verified, done.stderr
        assert (b"Signature Verified Successfully" in done.stdout) is verified


@pytest.fixture(scope="module")
async def signed_once(
    database_url: str,
    stored: list[str],
    keys: dict[str, tuple[Path, Path]],
    tmp_path_factory: pytest.TempPathFactory,
) -> bytes:
    out = tmp_path_factory.mktemp("signed") / "signed.jsonl"
    key = private_key(read(keys["ours"][0]))
    await export_to(database_url, run_id=None, thread_id=THREAD, out=out, sign_key=key)
    return read(out)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(at=st.integers(0, 10**6), flip=st.integers(1, 255), with_key=st.booleans())
def test_auditor_script_when_any_byte_changed_then_same_exit_and_line_as_verify(
    signed_once: bytes,
    keys: dict[str, tuple[Path, Path]],
    tmp_path_factory: pytest.TempPathFactory,
    at: int,
    flip: int,
    with_key: bool,
) -> None:
    at %= len(signed_once)
    edited = signed_once[:at] + bytes([signed_once[at] ^ flip]) + signed_once[at + 1 :]
    path = tmp_path_factory.mktemp("edit") / "edited.jsonl"
    write(path, edited)
    key_path = keys["ours"][1] if with_key else None
    verdict = verify_file(edited, None if key_path is None else public_key(read(key_path)))
    status, _, err = _script(path, key_path)
    assert status == verdict.exit_code, (verdict, err)
    if status == 1:
        assert _altered_line(err) == verdict.line, (verdict, err)


async def test_import_with_public_key_when_not_signed_by_it_then_refused_and_nothing_stored(
    signed: Path,
    empty_url: str,
    keys: dict[str, tuple[Path, Path]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    unsigned = tmp_path / "unsigned.jsonl"
    write(unsigned, _joined(_lines(signed)[:-1]))
    before = await fingerprint(empty_url)
    for file, key, words in (
        (signed, keys["theirs"][1], "signed by another key"),
        (unsigned, keys["ours"][1], "unsigned but a key was given"),
    ):
        status, _, err = await replay(capsys, "import", str(file), "--public-key", str(key),
                                      "--database-url", empty_url)  # fmt: skip
        assert status == 2 and words in err, err
        assert await fingerprint(empty_url) == before
    status, out, err = await replay(capsys, "import", str(signed), "--public-key",
                                    str(keys["ours"][1]), "--database-url", empty_url)  # fmt: skip
    assert status == 0 and "3 runs imported" in out, err
