"""A run's token as the log stores it (`_stored.c`)."""

from typing import Any, TypeVar

_T = TypeVar("_T")

def one(value: Any, cls: type[_T], /) -> _T | None: ...
def token(cls: type[_T], chunks: Any, /) -> list[_T] | None: ...
