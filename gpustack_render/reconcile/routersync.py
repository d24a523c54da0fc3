"""The router's objects in a pass (D26): which rendered ones to apply, which stored ones to prune,
and what the stored Deployment says about the router's readiness.

Like Services (``servicesync.py``): a rendered object is applied only when the stored one is not
aligned with it (:func:`~gpustack_render.reconcile.servicesync.service_aligned`: every rendered
value stored, no field of ours left over), so a converged router costs no write; a stored object
of the same kind and name that the deployment does not control is a conflict
(:class:`RouterConflict`), never written; a stored router object the deployment controls that is
no longer rendered (the router block removed, the InferencePool Setting turned off) is pruned,
its uid the delete's precondition.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview, ownerrefs
from gpustack_render.reconcile.servicesync import service_aligned

#: (kind, name) of one router object.
ObjectKey = tuple[str, str]


class RouterConflict(ownerrefs.OwnedElsewhere):
    """A rendered router object is stored under another owner."""


@dataclass(frozen=True)
class RouterSync:
    """The router writes of one pass: apply in order, report conflicts, then prune."""

    apply: tuple[dict[str, Any], ...]
    conflicts: tuple[RouterConflict, ...]
    #: (kind, name, uid) of stored router objects to delete.
    prune: tuple[tuple[str, str, str], ...]


def object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = jsonview.view(obj.get("metadata"))
    return str(obj.get("kind") or ""), str(meta.get("name") or "")


def sync_router(
    wanted: Sequence[dict[str, Any]],
    *,
    stored: Mapping[ObjectKey, Mapping[str, Any] | None],
    others: Iterable[Mapping[str, Any]],
    namespace: str,
    owner: str,
    owner_uid: str,
    manager: str,
) -> RouterSync:
    """The router writes of a pass.

    ``wanted`` are the rendered router objects (none without a router, or when it cannot be
    rendered); ``stored`` the stored object of each rendered (kind, name) (``None``: absent);
    ``others`` the stored router objects the pass knows of (any namespace, any owner; each
    must carry its ``kind``).
    """
    keys = {object_key(o) for o in wanted}
    apply: list[dict[str, Any]] = []
    conflicts: list[RouterConflict] = []
    for obj in wanted:
        kind, name = object_key(obj)
        existing = stored.get((kind, name))
        if existing is not None and not ownerrefs.controlled_by(existing, owner_uid):
            conflicts.append(RouterConflict(kind, namespace, name, owner))
        elif existing is None or not service_aligned(existing, obj, manager):
            apply.append(obj)
    prune: list[tuple[str, str, str]] = []
    for existing in others:
        meta = jsonview.view(existing.get("metadata"))
        if meta.get("namespace") != namespace or object_key(existing) in keys:
            continue
        if not ownerrefs.controlled_by(existing, owner_uid):
            continue
        kind, name = object_key(existing)
        prune.append((kind, name, str(meta.get("uid") or "")))
    return RouterSync(apply=tuple(apply), conflicts=tuple(conflicts), prune=tuple(prune))


@dataclass(frozen=True, slots=True)
class RouterObservation:
    """What the stored router Deployment says (``RouterReady``, ``roleSummary``'s ``R``)."""

    #: The Deployment exists and the deployment controls it.
    deployed: bool
    #: Its Pods that are ready (``status.readyReplicas``).
    ready: int = 0
    #: Set when a same-named Deployment is held by another owner.
    conflict: str = ""


def observe_router(deployment: Mapping[str, Any] | None, *, owner_uid: str) -> RouterObservation:
    """The router Deployment as stored (``None``: absent)."""
    if deployment is None:
        return RouterObservation(deployed=False)
    if not ownerrefs.controlled_by(deployment, owner_uid):
        meta = jsonview.view(deployment.get("metadata"))
        return RouterObservation(
            deployed=False,
            conflict=f"Deployment {meta.get('namespace')}/{meta.get('name')} exists and is not "
            "owned by this ModelDeployment",
        )
    ready = jsonview.view(deployment.get("status")).get("readyReplicas")
    return RouterObservation(deployed=True, ready=ready if isinstance(ready, int) else 0)
