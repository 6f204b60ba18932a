"""The C scan built with AddressSanitizer and UndefinedBehaviorSanitizer, fed bodies damaged
every which way: a read past a buffer, a leak of a reference count into freed memory or
undefined arithmetic stops the run with the sanitizer's report."""

from __future__ import annotations

from pathlib import Path

from tests.support.sanitized import ROOT, run_sanitized

SOURCE = ROOT / "service" / "agent_replay" / "ingest" / "_scan.c"

# Run on the sanitized build (`built`, see `run_sanitized`). Deterministic: seeded, no hypothesis.
FUZZ = r"""
import json, random
scan = built
rng = random.Random(17)
pieces = [b'"', b"\\", b"{", b"}", b"[", b"]", b":", b",", b" ", b"\t", b"\n", b"\r",
          b"\x00", b"0", b"-", b"e", b"E9", b"1" * 250, b"\\u", b"\\ud800", b"true", b"nul",
          b"\xc3", b"\xff", b'"type"', b'"type":"A"', b'"events"', b"[" * 300, b"x"]
def event(i):
    return {"type": ["A", "B", "TEXT_MESSAGE_CONTENT", f"T{i % 40}"][i % 4],
            "delta": "h\u00e9llo " * (i % 3), "n": [i, 1.5e-7, None, {"k": [True]}]}
checked = 0
for round in range(4000):
    sent = [event(rng.randrange(100)) for _ in range(rng.randrange(0, 12))]
    if rng.random() < 0.5:
        body = json.dumps({"events": sent, "expected_seq": 3}).encode()
    else:
        body = b"\n".join(json.dumps(e).encode() for e in sent) + b"\n"
    for _ in range(rng.randrange(0, 4)):
        at = rng.randrange(len(body) + 1)
        body = body[:at] + rng.choice(pieces) + body[at + rng.randrange(0, 4):]
    if rng.random() < 0.3:  # cut short: every token may meet the body's end
        body = body[: rng.randrange(len(body) + 1)]
    for found in (scan.scan(body), scan.scan_lines(body)):
        if found is None:
            continue
        kinds, spans, _, _, ascii = found
        if not ascii:
            try:
                body.decode()
            except UnicodeDecodeError:
                continue
        texts = scan.texts(body, spans)
        n = len(kinds)
        assert len(texts) == n
        start = rng.randrange(n + 1)
        stop = rng.randrange(start, n + 1)
        assert scan.joined(body, spans, start, stop, b"\n") == "\n".join(texts[start:stop])
        checked += 1
    for bad in ((0, -1), (-1, 1), (2, 1), (0, 10**6)):
        try:
            scan.joined(body, b"\x00" * 16, *bad, b"\n")
        except IndexError:
            continue
        raise AssertionError(f"joined{bad} answered")
print(checked)
"""


def test_scan_when_built_with_sanitizers_then_damaged_bodies_report_nothing(
    tmp_path: Path,
) -> None:
    done = run_sanitized(SOURCE, FUZZ, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # The bodies must have reached the scan's accepting paths, not only its declines.
    assert int(done.stdout) > 500
