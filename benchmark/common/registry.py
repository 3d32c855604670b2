"""A name → value table that refuses duplicate names (as ir_measures' registries do)."""

from __future__ import annotations

from collections.abc import ItemsView, Iterator
from typing import Generic, TypeVar

from benchmark.common.errors import unknown

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, fix: str = "") -> None:
        self.kind = kind
        self.fix = fix
        self._items: dict[str, T] = {}

    def register(self, name: str, value: T) -> T:
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = value
        return value

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise unknown(self.kind, name, self._items, self.fix) from None

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def items(self) -> ItemsView[str, T]:
        return self._items.items()
