"""The C of a commit lane's loops (`agent_replay/log/_group.c`) built with AddressSanitizer and
UndefinedBehaviorSanitizer, fed groups and rows of every shape: a read of freed memory, a
reference leaked or dropped, or undefined behaviour stops the run with the sanitizer's
report; every answer is also held to the Python twins'."""

from __future__ import annotations

from pathlib import Path

from tests.support.sanitized import ROOT, run_sanitized

SOURCE = ROOT / "service" / "agent_replay" / "log" / "_group.c"

# Run on the sanitized build (`built`, see `run_sanitized`). Deterministic: seeded, no hypothesis.
FUZZ = r"""
import random, sys
from collections import deque
from agent_replay.log.request import (Pending, RunShare, ones_columns_python, ones_python,
                                 settle_loop_python, take_python)
from agent_replay.log.summary import SUMMARIZED
from agent_replay.log.values import AppendResult, StoredChunk

class Future:
    def __init__(self, done):
        self._done = done
    def done(self):
        return self._done

rng = random.Random(29)
run = "".join(["RU", "N"])  # not interned: its reference count is this test's own
kind = "".join(["KI", "ND"])
texts = [kind, "a", "", "\x1e", "x\x1fy", "caf\u00e9", "\ud83d\ude42"]
one = RunShare(1)
before = (sys.getrefcount(run), sys.getrefcount(kind), sys.getrefcount(one))
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
    queue = [Pending(rng.choice(runs), [StoredChunk(rng.choice([kind, "RUN_ERROR"]), "{}", None,
                     None)] * rng.randrange(3), rng.choice([None, 1]), rng.random() < 0.2,
                     False, None, Future(rng.random() < 0.1), rng.choice([None, kind]),
                     rng.choice([None, None, ("p", 0, 0)]))
             for _ in range(rng.randrange(8))]
    blocked = set(rng.sample(runs, rng.randrange(len(runs) + 1)))
    limit = rng.randrange(1, 6)
    taken, kept, size = built.take(deque(queue), set(blocked), limit)
    assert (taken, kept, size) == take_python(deque(queue), set(blocked), limit)
    rows_c, rows_py, rested_c, rested_py = [], [], [], []
    made_c = built.ones(taken, rows_c, {}, one, SUMMARIZED, lambda r, i: rested_c.append(r))
    made_py = ones_python(taken, rows_py, {}, one, SUMMARIZED, lambda r, i: rested_py.append(r))
    assert (made_c, rows_c, rested_c) == (made_py, rows_py, rested_py)
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
for wrong in ((None, set(), 1), (deque(), [], 1), (deque(), frozenset(), 1),
              (deque([None]), set(), 1)):
    try:
        built.take(*wrong)
    except (TypeError, AttributeError):
        pass
    else:
        raise AssertionError(wrong)
try:
    built.ones({"r1": [None]}, [], {}, one, SUMMARIZED, None)
except (TypeError, AttributeError):
    pass
else:
    raise AssertionError("an append that is none")
try:
    built.settle({"r1": []}, {"r1": 0}, AppendResult)
except TypeError:
    pass
else:
    raise AssertionError("an empty run's appends")
appends = bases = rows = runs = queue = taken = kept = rows_c = rows_py = None
# Every reference the C took to a run id or a type it was given, it gave back.
assert (sys.getrefcount(run), sys.getrefcount(kind), sys.getrefcount(one)) == before, (
    sys.getrefcount(run), sys.getrefcount(kind), sys.getrefcount(one), before)
print(checked)
"""


def test_group_when_built_with_sanitizers_then_groups_of_every_shape_report_nothing(
    tmp_path: Path,
) -> None:
    done = run_sanitized(SOURCE, FUZZ, tmp_path)
    assert done.returncode == 0, done.stderr[-4000:]
    assert int(done.stdout) == 3000
