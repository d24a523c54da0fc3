"""The Binding → Pool → Backend walk: which objects a KV-cache reference leads to.

A ModelDeployment's ``spec.kvCache.poolRef`` and a Pod's binding annotation both name a
``KVCachePoolBinding`` in their namespace; the Binding names its ``KVCachePool``; the pool's
first ``spec.backends`` entry names its ``KVCacheBackend``. Rendering, admission and Pod
injection each follow that chain with their own checks between the links and their own error
mapping, so the walk is a :class:`BindingChain` read one link at a time, each link once, in the
order the caller asks. A read that fails raises
:class:`~gpustack_render.schema.lookups.LookupFailed` from the link that made it.
"""

from __future__ import annotations

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.schema.lookups import Lookups

_UNREAD = object()


class BindingChain:
    """The chain from the Binding ``name`` in ``namespace``, read lazily through ``lookups``."""

    def __init__(self, lookups: Lookups, *, namespace: str, name: str) -> None:
        self.lookups = lookups
        self.namespace = namespace
        self.name = name
        self._binding: object = _UNREAD
        self._pool: object = _UNREAD
        self._backend: object = _UNREAD

    def binding(self) -> KVCachePoolBinding | None:
        """The Binding (``None``: not found, or no name to read)."""
        if self._binding is _UNREAD:
            self._binding = (
                self.lookups.get(KVCachePoolBinding, self.namespace, self.name)
                if self.name
                else None
            )
        assert self._binding is None or isinstance(self._binding, KVCachePoolBinding)
        return self._binding

    @property
    def pool_name(self) -> str:
        """The pool the Binding names (``""`` before the Binding is found)."""
        binding = self.binding()
        return binding.spec.pool_ref.name if binding is not None else ""

    def pool(self) -> KVCachePool | None:
        """The Binding's pool (``None``: not found, or no Binding)."""
        if self._pool is _UNREAD:
            name = self.pool_name
            self._pool = self.lookups.get(KVCachePool, "", name) if name else None
        assert self._pool is None or isinstance(self._pool, KVCachePool)
        return self._pool

    @property
    def backend_name(self) -> str:
        """The pool's first backend (``""``: no pool, or the pool names none)."""
        pool = self.pool()
        return pool.spec.backends[0] if pool is not None and pool.spec.backends else ""

    def backend(self) -> KVCacheBackend | None:
        """The pool's backend (``None``: not found, or nothing to read)."""
        if self._backend is _UNREAD:
            name = self.backend_name
            self._backend = self.lookups.get(KVCacheBackend, "", name) if name else None
        assert self._backend is None or isinstance(self._backend, KVCacheBackend)
        return self._backend
