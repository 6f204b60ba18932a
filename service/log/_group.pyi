"""A commit lane's loops over a group of single chunks (`_group.c`)."""

from collections.abc import Mapping
from typing import Any, TypeVar

_P = TypeVar("_P")
_R = TypeVar("_R")

def settle(
    appends: Mapping[str, list[_P]], bases: Mapping[str, int], cls: type[_R], /
) -> tuple[list[tuple[str, int, bool]], list[tuple[_P, _R]], int, dict[str, list[_P]]]: ...
def ones_columns(rows: list[Any], /) -> tuple[str, str, str, str, str] | None: ...
