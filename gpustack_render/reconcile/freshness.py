"""Which of two copies of one object is the newer: the cache's or the answer to our own write.

A pass reads its deployment from the watch cache (docs/contract/controller.md §2). The cache
lags the API server by the time a watch event takes to arrive, so right after the controller
wrote the deployment (its status, its finalizer) the cache may still hold the copy from before
the write, and a pass that trusted it would forget what it had just remembered (a replacement in
flight, D6). The controller therefore keeps the API server's answer to each of its writes and
reads whichever copy is newer, as client-go's ``MutationCache`` does.

"Newer" is the order Kubernetes 1.35 made part of the API (KEP-5504, stable in 1.35;
``k8s.io/apimachinery/pkg/util/resourceversion.CompareResourceVersion``): a resource version is
a positive decimal integer without leading zeros, and two of one resource compare as integers.
A version that is not of that form cannot be ordered: :func:`newer` then answers ``None`` and
the caller reads the object live.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _well_formed(rv: str) -> bool:
    return bool(rv) and rv[0] != "0" and rv.isascii() and rv.isdigit()


def compare_resource_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as ``a`` is older than, the same as or newer than ``b``; ``None`` when either
    is not a well-formed resource version (an API server that does not promise the order)."""
    if not (_well_formed(a) and _well_formed(b)):
        return None
    if len(a) != len(b):
        return -1 if len(a) < len(b) else 1
    return (a > b) - (a < b)


def resource_version(obj: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion``, or ``""``."""
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion") or "") if isinstance(meta, Mapping) else ""


def newer(cached: Mapping[str, Any], written: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The newer of the cache's copy and the answer to our last write of the same object (the
    cache's when there is no write, or the write is of an object since deleted and created
    again: another uid); ``None`` when the two cannot be ordered."""
    if written is None:
        return cached
    uid = (cached.get("metadata") or {}).get("uid")
    if uid != (written.get("metadata") or {}).get("uid"):
        return cached
    order = compare_resource_versions(resource_version(cached), resource_version(written))
    if order is None:
        return None
    return written if order < 0 else cached
