"""The one rule for when a watch-fed cache may answer for the API server, used by the controller
and the webhook server alike.

A read is answered from an :class:`~gpustack_kube.informer.Informer` only when all of these hold:

- the informer has **synced** (its first list is in) and is **current** (it follows an open
  stream: a cache cut off from the API server, or one whose stream fell silent, is not used);
- the object it holds is **not being deleted** (a ``deletionTimestamp``: read live, so it is
  answered exactly as without a cache).

Otherwise the object is read live. A miss (the cache does not hold the name) is read live too,
since it may be an object created a moment ago whose watch event has not arrived, unless the
caller's kind is **authoritative** in the cache: its objects are looked up by names most of
which do not exist (a deployment's possible scalers), and a live read of each on every pass
would cost a request per name; there a usable cache's miss is an absence. A create of a name the
cache had not seen then answers 409, and the object's watch event brings the caller back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpustack_kube.client import Kube
from gpustack_kube.informer import Informer
from gpustack_render.schema.resources import Resource


class _Unanswered:
    """The cache cannot answer for the API server: read live."""

    def __repr__(self) -> str:
        return "UNANSWERED"


UNANSWERED: Final = _Unanswered()


def usable(informer: Informer | None) -> bool:
    """The informer has listed and follows an open stream."""
    return informer is not None and informer.synced.is_set() and informer.current


def deleting(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and meta.get("deletionTimestamp") is not None


def from_cache(
    informer: Informer | None, key: str, *, authoritative: bool = False
) -> dict[str, Any] | _Unanswered | None:
    """The cached object under ``key`` (``namespace/name``, or ``name`` for a cluster-scoped
    kind) when the cache may answer; ``None`` when it answers "absent" (an authoritative kind's
    miss); else :data:`UNANSWERED`."""
    if informer is None or not usable(informer):
        return UNANSWERED
    obj = informer.get(key)
    if obj is None:
        return None if authoritative else UNANSWERED
    if deleting(obj):
        return UNANSWERED
    return obj


class CachedReader:
    """Reads by name: from the cache when :func:`from_cache` answers, else live."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    async def get(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        informer: Informer | None = None,
        authoritative: bool = False,
    ) -> dict[str, Any] | None:
        key = f"{namespace}/{name}" if namespace and resource.namespaced else name
        found = from_cache(informer, key, authoritative=authoritative)
        if not isinstance(found, _Unanswered):
            return found
        return await self.kube.get(resource, name, namespace)
