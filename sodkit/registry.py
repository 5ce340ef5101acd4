"""A small name -> builder registry for what a config picks by name (networks, losses, presets)."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T", bound=Callable[..., Any])


class Registry(Generic[T]):
    """Maps names to builders; ``get`` of an unknown name raises a KeyError that lists the names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def decorator(obj: T) -> T:
            if name in self._items:
                raise ValueError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = obj
            return obj

        return decorator

    def get(self, name: str) -> T:
        if name not in self._items:
            raise KeyError(self.unknown_message(name))
        return self._items[name]

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (registered: {', '.join(self.names())})"

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items
