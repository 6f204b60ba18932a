"""The C of a run's token (`service/agent_replay/log/_stored.c`) built with AddressSanitizer and
UndefinedBehaviorSanitizer, fed objects of every shape: a read of freed memory, a reference
leaked or dropped, or undefined behaviour stops the run with the sanitizer's report."""

from __future__ import annotations

from pathlib import Path

from tests.support.sanitized import ROOT, run_sanitized

SOURCE = ROOT / "service" / "agent_replay" / "log" / "_stored.c"

# Run on the sanitized build (`built`, see `run_sanitized`). Deterministic: seeded, no hypothesis.
FUZZ = r"""
import random, sys
from agent_replay.log.chunks import stored, stored_one_python
from agent_replay.log.values import StoredChunk

class Unencodable:
    pass

rng = random.Random(23)
kind = "".join(["KI", "ND"])  # not interned: its reference count is this test's own
pieces = ["a", "\x00", "\ud83d", "caf\u00e9", "", "TEXT_MESSAGE_CONTENT", 7, None, 2**70,
          1.5, True, [1, {"k": "\ud800"}], {"k": "v"}, Unencodable()]
before = sys.getrefcount(kind)
checked = 0
for _ in range(20000):
    value = {}
    for key in rng.sample(["type", "messageId", "toolCallId", "delta", "n"], rng.randrange(6)):
        value[key] = kind if rng.random() < 0.3 else rng.choice(pieces)
    if rng.random() < 0.05:
        value = rng.choice([[value], "type", None, 3, dict])
    found = built.one(value, StoredChunk)
    listed = built.token(StoredChunk, [value])
    # A list of any other length, or no list, is declined.
    assert built.token(StoredChunk, [value, value]) is None
    assert built.token(StoredChunk, value) is None or type(value) is list
    if found is None:
        assert listed is None, (listed, value)
        continue
    assert type(found) is StoredChunk, found
    assert found == stored_one_python(value) == stored(value, 0), (found, value)
    assert listed == [found], (listed, value)
    checked += 1
found = listed = value = None
# Every reference the C took to a type or id it was given, it gave back.
assert sys.getrefcount(kind) == before, (sys.getrefcount(kind), before)
print(checked)
"""


def test_stored_when_built_with_sanitizers_then_objects_of_every_shape_report_nothing(
    tmp_path: Path,
) -> None:
    done = run_sanitized(SOURCE, FUZZ, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    # The objects must have reached the C's accepting path, not only its declines.
    assert int(done.stdout) > 1000
