"""The teardown of a deleted ModelDeployment (docs/contract/controller.md §12), one pass at a time.

While an owned Pod remains: report ``Deleting`` in status, delete every owned Pod not already
terminating, then the Workloads of this deployment's own Pods (a Pod that merely carries the
deployment's labels is not ours to release), and look again shortly. Once none remains: release
the Binding claim, then remove the finalizer. A deployment without the finalizer is not ours
to tear down.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
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
    owned = index.owned
    if owned:
        status = deleting_status(md, remaining=len(owned), now=now)
        owned_uids = {p.uid for p in owned}
        return Draining(
            status=status if status_changed(md.status, status) else None,
            delete_pods=tuple(p for p in owned if not p.terminating),
            delete_workloads=tuple(w.name for w in index.workloads if w.owns_any(owned_uids)),
        )
    kv = md.spec.kv_cache
    return Releasing(
        binding=kv.pool_ref.name if kv is not None and kv.pool_ref.name else None,
        finalizers=claims.without_finalizer(md.metadata.finalizers),
    )
