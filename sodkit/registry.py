"""The one name -> object registry of sodkit: everything picked by name (networks, losses,
dataset presets, metric families, import formats, inference pipelines, commands) is registered
in a :class:`Registry`, so an unknown name is refused the same way everywhere (did-you-mean and
the registered names) and lists, help texts and allowed values are derived from it. A registry
keeps its registration order (families are computed and reported in it); messages list the
names sorted."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to objects (builders, descriptions); ``get`` of an unknown name raises a
    KeyError that lists the names."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """A decorator: ``@NETWORKS.register("fpn")``."""
        def decorator(obj: T) -> T:
            return self.add(name, obj)

        return decorator

    def add(self, name: str, obj: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is registered twice")
        self._items[name] = obj
        return obj

    def get(self, name: str) -> T:
        if name not in self._items:
            raise KeyError(self.unknown_message(name))
        return self._items[name]

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, self.names(), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (registered: {', '.join(self.names())})"

    def names(self) -> list[str]:
        """The names, sorted (for messages and help texts)."""
        return sorted(self._items)

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, object)`` in registration order."""
        return iter(list(self._items.items()))

    def values(self) -> Iterator[T]:
        return iter(list(self._items.values()))

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        """The names in registration order."""
        return iter(list(self._items))

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

