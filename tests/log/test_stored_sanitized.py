"""The C of a run's token (`service/log/_stored.c`) built with AddressSanitizer and
UndefinedBehaviorSanitizer, fed objects of every shape: a read of freed memory, a reference
leaked or dropped, or undefined behaviour stops the run with the sanitizer's report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[2] / "service" / "log" / "_stored.c"

# Run in a child process that loads the sanitized build (the sanitizers' runtime must
# come first in it, so it is preloaded). Deterministic: seeded, no hypothesis.
FUZZ = r"""
import importlib.machinery, importlib.util, random, sys
loader = importlib.machinery.ExtensionFileLoader("_stored", sys.argv[1])
spec = importlib.util.spec_from_loader("_stored", loader)
built = importlib.util.module_from_spec(spec)
loader.exec_module(built)
from service.log.chunks import StoredChunk, stored, stored_one_python

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
    if found is None:
        continue
    assert type(found) is StoredChunk, found
    assert found == stored_one_python(value) == stored(value, 0), (found, value)
    checked += 1
found = value = None
# Every reference the C took to a type or id it was given, it gave back.
assert sys.getrefcount(kind) == before, (sys.getrefcount(kind), before)
print(checked)
"""


def test_stored_when_built_with_sanitizers_then_objects_of_every_shape_report_nothing(
    tmp_path: Path,
) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to build the token's C with sanitizers")
    include = sysconfig.get_paths()["include"]
    built = tmp_path / "_stored.so"
    subprocess.run(
        [gcc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-shared", "-fPIC", f"-I{include}", str(SOURCE),
         "-o", str(built)],
        check=True,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    runtimes = [
        subprocess.run(
            [gcc, f"-print-file-name={name}"], check=True, capture_output=True, text=True
        ).stdout.strip()
        for name in ("libasan.so", "libubsan.so")
    ]
    env = {
        **os.environ,
        "LD_PRELOAD": ":".join(runtimes),
        # Every object from malloc, which the sanitizer guards (Python's own small-object
        # arenas it cannot see into): a read of a freed object is then caught.
        "PYTHONMALLOC": "malloc",
        # Python's own allocations are not the token's: leaks are not what this checks.
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
        "UBSAN_OPTIONS": "print_stacktrace=1:exitcode=98",
    }
    done = subprocess.run(
        [sys.executable, "-c", FUZZ, str(built)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=SOURCE.parents[2],
    )
    assert done.returncode == 0, done.stderr[-4000:]
    # The objects must have reached the C's accepting path, not only its declines.
    assert int(done.stdout) > 1000
