"""A commit lane's loops over a group of single chunks (`_group.c`)."""

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

_P = TypeVar("_P")
_R = TypeVar("_R")
_S = TypeVar("_S")

def settle(
    appends: Mapping[str, list[_P]], bases: Mapping[str, int], cls: type[_R], /
) -> tuple[list[tuple[str, int, bool]], list[tuple[_P, _R]], int, dict[str, list[_P]]]: ...
def ones_columns(rows: list[Any], /) -> tuple[str, str, str, str, str] | None: ...
def take(
    queue: Iterable[_P], blocked: set[str], max_events: int, /
) -> tuple[dict[str, list[_P]], list[_P], int]: ...
def ones(
    appends: Mapping[str, list[_P]],
    rows: list[Any],
    shares: dict[str, _S],
    one_share: _S,
    summarized: frozenset[str],
    rest: Callable[[str, list[_P]], None],
    /,
) -> int: ...
