"""RFC 6902 JSON Patch, applied to a copy: what AG-UI's `STATE_DELTA` carries.

`@ag-ui/client` applies a delta with fast-json-patch and keeps the old state
when an operation fails; `apply_patch` raises `PatchError` so callers can do
the same. Pure: the input document is never mutated.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """An operation that cannot apply (bad path, failed test, unknown op)."""


def _tokens(pointer: Any) -> list[str]:
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise PatchError(f"not a JSON pointer: {pointer!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]


def _index(container: list[Any], token: str, *, insert: bool) -> int:
    if insert and token == "-":
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise PatchError(f"not an array index: {token!r}")
    index = int(token)
    if index > len(container) or (not insert and index == len(container)):
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, insert=False)]
        else:
            raise PatchError(f"path segment {token!r} does not exist")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, insert=False)]
    raise PatchError(f"path segment {last!r} does not exist")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, insert=True), value)
    else:
        raise PatchError(f"cannot add under a {type(parent).__name__}")
    return doc


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent, last = _parent(doc, tokens), tokens[-1]
    if isinstance(parent, dict) and last in parent:
        del parent[last]
    elif isinstance(parent, list):
        del parent[_index(parent, last, insert=False)]
    else:
        raise PatchError(f"path segment {last!r} does not exist")
    return doc


def apply_patch(document: Any, operations: Any) -> Any:
    """The document after every operation, or PatchError (the document is left alone)."""
    if not isinstance(operations, list):
        raise PatchError("a patch is a list of operations")
    doc = copy.deepcopy(document)
    for op in operations:
        if not isinstance(op, dict):
            raise PatchError(f"not an operation: {op!r}")
        kind, tokens = op.get("op"), _tokens(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise PatchError(f"{kind} needs a value")
        if kind == "add":
            doc = _add(doc, tokens, copy.deepcopy(op["value"]))
        elif kind == "remove":
            doc = _remove(doc, tokens)
        elif kind == "replace":
            _get(doc, tokens)
            doc = (
                _add(_remove(doc, tokens), tokens, copy.deepcopy(op["value"]))
                if tokens
                else (copy.deepcopy(op["value"]))
            )
        elif kind in ("move", "copy"):
            source = _tokens(op.get("from"))
            value = copy.deepcopy(_get(doc, source))
            if kind == "move":
                doc = _remove(doc, source)
            doc = _add(doc, tokens, value)
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise PatchError(f"test failed at {op.get('path')!r}")
        else:
            raise PatchError(f"unknown operation {kind!r}")
    return doc
