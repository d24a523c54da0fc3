"""A key → set-of-values map that drops a key with its last value: the reverse maps of the
controller's watch indexes (:mod:`~gpustack_render.reconcile.inputindex`,
:mod:`~gpustack_render.reconcile.ownerindex`), which must not grow with every Pod uid ever
seen."""

from __future__ import annotations

from collections.abc import Set
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class MultiMap(Generic[K, V]):
    """Each key's values; a key with no value left is gone."""

    def __init__(self) -> None:
        self._items: dict[K, set[V]] = {}

    def add(self, key: K, value: V) -> None:
        self._items.setdefault(key, set()).add(value)

    def discard(self, key: K, value: V) -> None:
        values = self._items.get(key)
        if values is not None:
            values.discard(value)
            if not values:
                del self._items[key]

    def get(self, key: K) -> Set[V]:
        """The values of ``key`` (empty when it has none); read-only."""
        return self._items.get(key, frozenset())

    def __len__(self) -> int:
        """The keys holding a value."""
        return len(self._items)
