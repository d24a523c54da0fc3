"""The teardown of a deleted ModelDeployment (docs/contract/controller.md §12), one pass at a time.

While an owned Pod remains: report ``Deleting`` in status, delete every owned Pod not already
terminating, then the Workloads of this deployment's own Pods (a Pod that merely carries the
deployment's labels is not ours to release), and look again shortly. Once none remains: release
the Binding claim, then remove the finalizer. A deployment without the finalizer is not ours
to tear down.

A deleted deployment whose stored object no longer decodes (:func:`plan_unreadable_teardown`)
is torn down the same way from its metadata and ``spec.kvCache.poolRef.name``, without a status
write: an object the controller cannot read must not keep its Pods, its quota and its own
deletion for ever.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.core import jsonview
from gpustack_render.reconcile import claims
from gpustack_render.reconcile.observed import ObservedPod
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.status import deleting_status, status_changed


@dataclass(frozen=True)
class Draining:
    """Owned Pods remain: write ``status`` (when set), delete, and requeue."""

    status: ModelDeploymentStatus | None
    delete_pods: tuple[ObservedPod, ...]
    delete_workloads: tuple[str, ...]


@dataclass(frozen=True)
class Releasing:
    """No owned Pod remains: release the claim on ``binding`` (when set), then store
    ``finalizers`` (when set: ours removed) and forget the deployment."""

    binding: str | None
    finalizers: list[str] | None


def plan_teardown(
    md: ModelDeployment, *, index: ReplicaIndex, now: str
) -> Draining | Releasing | None:
    """The next teardown step of ``md`` (``None``: not ours, nothing to do)."""
    if claims.FINALIZER not in md.metadata.finalizers:
        return None
    status = None
    if index.owned:
        draining = deleting_status(md, remaining=len(index.owned), now=now)
        status = draining if status_changed(md.status, draining) else None
    kv = md.spec.kv_cache
    binding = kv.pool_ref.name if kv is not None and kv.pool_ref.name else None
    return _next_step(md.metadata.finalizers, binding, index=index, status=status)


def plan_unreadable_teardown(
    raw: Mapping[str, Any], *, index: ReplicaIndex
) -> Draining | Releasing | None:
    """The next teardown step of a stored deployment that does not decode, read from its
    metadata and ``spec.kvCache.poolRef.name`` alone (``None``: not being deleted, or not
    ours). No status is written: the stored one cannot be read back."""
    meta = jsonview.view(raw.get("metadata"))
    finalizers = [f for f in jsonview.items(meta.get("finalizers")) if isinstance(f, str)]
    if meta.get("deletionTimestamp") is None or claims.FINALIZER not in finalizers:
        return None
    kv = jsonview.view(jsonview.view(raw.get("spec")).get("kvCache"))
    ref = jsonview.view(kv.get("poolRef")).get("name")
    binding = ref if isinstance(ref, str) and ref else None
    return _next_step(finalizers, binding, index=index, status=None)


def _next_step(
    finalizers: Sequence[str],
    binding: str | None,
    *,
    index: ReplicaIndex,
    status: ModelDeploymentStatus | None,
) -> Draining | Releasing:
    owned = index.owned
    if owned:
        owned_uids = {p.uid for p in owned}
        return Draining(
            status=status,
            delete_pods=tuple(p for p in owned if not p.terminating),
            delete_workloads=tuple(w.name for w in index.workloads if w.owns_any(owned_uids)),
        )
    return Releasing(binding=binding, finalizers=claims.without_finalizer(finalizers))
