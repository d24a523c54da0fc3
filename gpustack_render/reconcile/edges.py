"""Edges kept both ways: each key's targets, and each target's keys. The controller's watch
indexes (:mod:`~gpustack_render.reconcile.inputindex`, :mod:`~gpustack_render.reconcile.ownerindex`)
are made of these, so an event replaces one key's edges and a question is answered from the
reverse side without a scan. A target with no key left is dropped: the maps do not grow with
every Pod uid ever seen."""

from __future__ import annotations

from collections.abc import Iterable, Set
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class Edges(Generic[K, V]):
    """``key → targets`` and ``target → keys``, replaced one key at a time."""

    def __init__(self) -> None:
        self._targets: dict[K, tuple[V, ...]] = {}
        self._keys: dict[V, set[K]] = {}

    def set(self, key: K, targets: Iterable[V]) -> None:
        """``key`` now leads to ``targets`` (none: ``key`` is forgotten)."""
        for target in self._targets.pop(key, ()):
            keys = self._keys[target]
            keys.discard(key)
            if not keys:
                del self._keys[target]
        fresh = tuple(dict.fromkeys(targets))
        if fresh:
            self._targets[key] = fresh
            for target in fresh:
                self._keys.setdefault(target, set()).add(key)

    def targets(self, key: K) -> tuple[V, ...]:
        """What ``key`` leads to, in the order set."""
        return self._targets.get(key, ())

    def keys_to(self, target: V) -> Set[K]:
        """The keys leading to ``target``; read-only."""
        return self._keys.get(target, frozenset())

    def __len__(self) -> int:
        """Entries held both ways: zero once every key is forgotten."""
        return len(self._targets) + len(self._keys)
