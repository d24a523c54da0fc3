"""How the library reads the objects a deployment or a Pod names.

The library never performs I/O: callers pass a :class:`Lookups`. The command line answers from
the given files (:class:`StaticLookups`); the webhook answers with live reads; the controller
answers from what it fetched for the pass. ``None`` means "not found"; a read that failed for any
other reason raises :class:`LookupFailed`, which rules turn into an internal error rather than a
refusal of a valid object.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.schema.decoding import decode_model

M = TypeVar("M", bound=InputObject)

#: The namespaced kinds among the read kinds without a field of their own in StaticLookups.
NAMESPACED_READ_KINDS = frozenset({"PersistentVolumeClaim"})


class LookupFailed(Exception):  # noqa: N818 (public API since the first release; names the event)
    """A read failed for a reason other than "not found" (timeout, permission, server error)."""

    def __init__(self, kind: str, name: str, reason: str, *, namespace: str = "") -> None:
        where = f"{namespace}/{name}" if namespace else name
        super().__init__(f"reading {kind} {where} failed: {reason}")
        self.kind = kind
        self.name = name
        self.namespace = namespace
        self.reason = reason


def decode_stored(model: type[M], data: Any, *, name: str, namespace: str = "") -> M:
    """``data``, a stored object read for a rule, decoded into ``model``.

    The one policy for a stored object that does not decode, shared by the webhook and the
    controller: the read failed (:class:`LookupFailed`, so the caller answers with an internal
    error or retries), it is never taken for an absent object.
    """
    obj, errs = decode_model(model, data)
    if obj is None:
        first = errs[0].message() if errs else "does not decode"
        raise LookupFailed(
            model.__name__,
            name,
            f"the stored object does not decode ({first})",
            namespace=namespace,
        )
    return obj


class Lookups(Protocol):
    """Read access to the objects rules depend on: one generic read for every kind.

    ``namespace`` is ``""`` for a cluster-scoped kind. ``None`` means "not found"; any other
    failure raises :class:`LookupFailed`.
    """

    def get(self, kind: type[M], namespace: str, name: str) -> M | None: ...


@dataclass
class StaticLookups:
    """Lookups answered from objects held in memory; ``failing`` names reads that raise."""

    instance_types: dict[str, InstanceType] = field(default_factory=dict)
    bindings: dict[tuple[str, str], KVCachePoolBinding] = field(default_factory=dict)
    pools: dict[str, KVCachePool] = field(default_factory=dict)
    backends: dict[str, KVCacheBackend] = field(default_factory=dict)
    artifacts: dict[tuple[str, str], ModelArtifact] = field(default_factory=dict)
    #: The other read kinds (the storage kinds weight delivery reads), by (kind, ns, name);
    #: ``ns`` is ``""`` for a cluster-scoped kind.
    others: dict[tuple[str, str, str], InputObject] = field(default_factory=dict)
    #: (kind, namespace, name) triples whose read raises LookupFailed (for tests and faults).
    failing: set[tuple[str, str, str]] = field(default_factory=set)
    #: Reads that failed for the caller, by (kind, namespace, name): raised again when asked.
    failures: dict[tuple[str, str, str], LookupFailed] = field(default_factory=dict)

    @classmethod
    def of(
        cls, objects: Iterable[InputObject], *, default_namespace: str = "default"
    ) -> StaticLookups:
        """Index ``objects`` by kind and name (namespaced kinds by namespace too)."""
        out = cls()
        for obj in objects:
            ns = obj.metadata.namespace or default_namespace
            if isinstance(obj, InstanceType):
                out.instance_types[obj.name] = obj
            elif isinstance(obj, KVCachePoolBinding):
                out.bindings[(ns, obj.name)] = obj
            elif isinstance(obj, KVCachePool):
                out.pools[obj.name] = obj
            elif isinstance(obj, KVCacheBackend):
                out.backends[obj.name] = obj
            elif isinstance(obj, ModelArtifact):
                out.artifacts[(ns, obj.name)] = obj
            else:
                scoped = ns if obj.kind in NAMESPACED_READ_KINDS else ""
                out.others[(obj.kind, scoped, obj.name)] = obj
        return out

    def _check(self, kind: str, namespace: str, name: str) -> None:
        failure = self.failures.get((kind, namespace, name))
        if failure is not None:
            raise failure
        if (kind, namespace, name) in self.failing:
            raise LookupFailed(kind, name, "injected failure", namespace=namespace)

    def all_of(self, kind: type[M]) -> list[M]:
        """Every object of ``kind`` held among the others, by name (the render reads every
        ``NodeModelStore`` it is given: which nodes hold a digest is not a read by name)."""
        found = [obj for obj in self.others.values() if isinstance(obj, kind)]
        return sorted(found, key=lambda obj: (obj.metadata.namespace or "", obj.name))

    def get(self, kind: type[M], namespace: str, name: str) -> M | None:
        self._check(kind.__name__, namespace, name)
        found: InputObject | None
        if kind is InstanceType:
            found = self.instance_types.get(name)
        elif kind is KVCachePoolBinding:
            found = self.bindings.get((namespace, name))
        elif kind is KVCachePool:
            found = self.pools.get(name)
        elif kind is KVCacheBackend:
            found = self.backends.get(name)
        elif kind is ModelArtifact:
            found = self.artifacts.get((namespace, name))
        else:
            found = self.others.get((kind.__name__, namespace, name))
        return found if isinstance(found, kind) else None
