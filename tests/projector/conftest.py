"""Locates the shared conformance corpus: ``shared/`` is the sibling of the
repository root (also in CI, where a copy of it sits beside the clone)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
CASES = SHARED / "conformance" / "projector"

if not (CASES / "compare.py").is_file():
    raise RuntimeError(f"conformance corpus not found at {CASES}: shared/ must sit beside the repo")


def load_compare() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_compare", CASES / "compare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
