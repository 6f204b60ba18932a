"""JSON values compared as JSON, for the ingest tests."""

from __future__ import annotations

from typing import Any


def same(a: Any, b: Any) -> bool:
    """JSON equality, with true never equal to 1 and 1 equal to 1.0."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b
