"""Our C extensions built with AddressSanitizer and UndefinedBehaviorSanitizer, and a script
run against such a build in a child process (the sanitizers' runtime must come first in it,
so it is preloaded): a read past a buffer or of freed memory, a reference count gone wrong
or undefined arithmetic stops the child with the sanitizer's report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


# What every script runs first: the sanitized build, loaded as the module `built`.
_LOAD_BUILT = """
import importlib.machinery, importlib.util, sys
_loader = importlib.machinery.ExtensionFileLoader({name!r}, sys.argv[1])
built = importlib.util.module_from_spec(importlib.util.spec_from_loader({name!r}, _loader))
_loader.exec_module(built)
"""


def run_sanitized(source: Path, script: str, workdir: Path) -> subprocess.CompletedProcess[str]:
    """Build `source` with the sanitizers into `workdir` and run `script` from the
    checkout's root, the build loaded before it as `built`; returns the finished child."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail(f"gcc is needed to build {source.name} with sanitizers")
    include = sysconfig.get_paths()["include"]
    built = workdir / f"{source.stem}.so"
    subprocess.run(
        [gcc, "-O1", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
         "-fno-omit-frame-pointer", "-shared", "-fPIC", f"-I{include}", str(source),
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
        # arenas it cannot see into): a read past a buffer's end or of a freed object is
        # then caught.
        "PYTHONMALLOC": "malloc",
        # Python's own allocations are not the extension's: leaks are not what this checks.
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0:exitcode=99",
        "UBSAN_OPTIONS": "print_stacktrace=1:exitcode=98",
    }
    return subprocess.run(
        [sys.executable, "-c", _LOAD_BUILT.format(name=source.stem) + script, str(built)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
