"""A pytest plugin (`-p tests.ops.collected`) that writes, for each collected test, what it
uses: its fixtures (with those they depend on), the names its module imported from the
helpers that start clusters, nginx or service processes, and its markers. One JSON object a
line, to the file named by REPLAY_COLLECTED_REPORT. tests/ops/test_ops_test.py reads it to
check `ops/test --quick`."""

from __future__ import annotations

import json
import os

import pytest

HELPER_MODULES = ("tests.support.cluster", "tests.support.proxy", "tests.support.servers")


def pytest_collection_finish(session: pytest.Session) -> None:
    with open(os.environ["REPLAY_COLLECTED_REPORT"], "w", encoding="utf-8") as out:
        for item in session.items:
            module = getattr(item, "module", None)
            helpers = sorted(
                f"{value.__module__}.{name}"
                for name, value in (vars(module) if module is not None else {}).items()
                if getattr(value, "__module__", None) in HELPER_MODULES
            )
            fixtures = sorted(getattr(item, "fixturenames", ()))
            markers = sorted({mark.name for mark in item.iter_markers()})
            line = {"id": item.nodeid, "fixtures": fixtures, "helpers": helpers, "markers": markers}
            out.write(json.dumps(line) + "\n")
