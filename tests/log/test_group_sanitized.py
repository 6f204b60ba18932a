"""The C of a commit lane's loops (`service/log/_group.c`) built with AddressSanitizer and
UndefinedBehaviorSanitizer, fed groups and rows of every shape: a read of freed memory, a
reference leaked or dropped, or undefined behaviour stops the run with the sanitizer's
report; every answer is also held to the Python twins'."""

from __future__ import annotations

from pathlib import Path

from tests.sanitized import ROOT, run_sanitized

SOURCE = ROOT / "service" / "log" / "_group.c"

# Run on the sanitized build (`built`, see `run_sanitized`). Deterministic: seeded, no hypothesis.
FUZZ = r"""
import random, sys
from service.log.chunks import StoredChunk
from service.log.request import AppendResult, Pending, ones_columns_python, settle_loop_python

rng = random.Random(29)
run = "".join(["RU", "N"])  # not interned: its reference count is this test's own
kind = "".join(["KI", "ND"])
texts = [kind, "a", "", "\x1e", "x\x1fy", "caf\u00e9", "\ud83d\ude42"]
before = (sys.getrefcount(run), sys.getrefcount(kind))
checked = 0
for _ in range(3000):
    runs = rng.sample([run, "r1", "r2", "r3", "r4"], rng.randrange(1, 6))
    appends = {
        r: [Pending(r, [StoredChunk(kind, "{}", None, None)] * rng.randrange(4), None,
                    rng.random() < 0.2, False, None, None)
            for _ in range(rng.randrange(1, 4))]
        for r in runs
    }
    bases = {r: rng.randrange(2**40) for r in runs if rng.random() < 0.7}
    assert built.settle(appends, bases, AppendResult) == settle_loop_python(
        appends, bases, AppendResult)
    rows = [(r, 1, rng.choice(texts), "{}", rng.choice([None, *texts]),
             rng.choice([None, *texts]), 1) for r in runs]
    assert built.ones_columns(rows) == ones_columns_python(rows), rows
    checked += 1
for wrong in ([("r1", 1, None, "{}", None, None, 1)], [("r1",)], ["r1"], ("r1",)):
    try:
        built.ones_columns(wrong)
    except TypeError:
        pass
    else:
        raise AssertionError(wrong)
try:
    built.settle({"r1": []}, {"r1": 0}, AppendResult)
except TypeError:
    pass
else:
    raise AssertionError("an empty run's appends")
appends = bases = rows = runs = None
# Every reference the C took to a run id or a type it was given, it gave back.
assert (sys.getrefcount(run), sys.getrefcount(kind)) == before, (
    sys.getrefcount(run), sys.getrefcount(kind), before)
print(checked)
"""


def test_group_when_built_with_sanitizers_then_groups_of_every_shape_report_nothing(
    tmp_path: Path,
) -> None:
    done = run_sanitized(SOURCE, FUZZ, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert int(done.stdout) == 3000
