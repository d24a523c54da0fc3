"""Which rendered Services a pass applies and which stored ones it prunes
(docs/contract/render.md §19, docs/contract/controller.md §11), and when a stored Service is already
aligned with the rendering.

A rendered Service is applied unless the stored one is aligned (a value differs, or the
controller's field manager still owns a field the rendering no longer carries); a stored
Service held by another owner is a conflict (:class:`ServiceConflict`), never overwritten: the
controller reports it as the pass's failure, so the pass is retried until the name is free. A
Service this deployment controls that is no longer rendered is pruned, except an instance
Service while a Pod of its ordinal remains (peers of a terminating instance still resolve one
another).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview, labels, ownerrefs
from gpustack_render.reconcile.applied import apply_aligned
from gpustack_render.reconcile.observed import ObservedPod


class ServiceConflict(ownerrefs.OwnedElsewhere):
    """The rendered Service ``namespace/name`` is stored under another owner
    (docs/contract/controller.md §11)."""

    def __init__(self, namespace: str, name: str, deployment: str) -> None:
        super().__init__("Service", namespace, name, deployment)


@dataclass(frozen=True)
class ServiceSync:
    """The Service writes of one pass: apply in order, report conflicts, then prune."""

    apply: tuple[dict[str, Any], ...]
    #: Rendered Services stored under another owner (never written), in rendering order.
    conflicts: tuple[ServiceConflict, ...]
    #: (name, uid) of stored Services to delete: the uid is the delete's precondition, so a
    #: same-named Service created since the cache saw this one is never deleted.
    prune: tuple[tuple[str, str], ...]


def sync_services(
    wanted: Sequence[dict[str, Any]],
    *,
    stored: Mapping[str, Mapping[str, Any] | None],
    others: Iterable[Mapping[str, Any]],
    namespace: str,
    owner: str,
    owner_uid: str,
    pods: Sequence[ObservedPod],
    manager: str,
) -> ServiceSync:
    """The Service writes of a pass.

    ``owner`` and ``owner_uid`` are the name and uid of the ModelDeployment that renders
    ``wanted``. ``stored`` holds the stored Service of each rendered name (``None``: absent);
    ``others`` the stored Services the pass knows of (any namespace, any owner; those rendered
    are skipped); ``pods`` the deployment's Pods as observed after the pass's Pod writes.
    """
    names = {_name(s) for s in wanted}
    apply: list[dict[str, Any]] = []
    conflicts: list[ServiceConflict] = []
    for service in wanted:
        existing = stored.get(_name(service))
        if existing is not None and not ownerrefs.controlled_by(existing, owner_uid):
            conflicts.append(ServiceConflict(namespace, _name(service), owner))
        elif existing is None or not service_aligned(existing, service, manager):
            apply.append(service)
    held = {(p.role, p.ordinal) for p in pods if p.owned}
    prune: list[tuple[str, str]] = []
    for existing in others:
        meta = jsonview.view(existing.get("metadata"))
        if meta.get("namespace") != namespace or meta.get("name") in names:
            continue
        if not ownerrefs.controlled_by(existing, owner_uid):
            continue
        selector = jsonview.view(jsonview.view(existing.get("spec")).get("selector"))
        ordinal = selector.get(labels.POD_ORDINAL)
        role = selector.get(labels.COMPONENT)
        if ordinal is not None and (role, _int(ordinal)) in held:
            continue  # peers of a terminating instance still resolve one another
        prune.append((str(meta.get("name")), str(meta.get("uid") or "")))
    return ServiceSync(apply=tuple(apply), conflicts=tuple(conflicts), prune=tuple(prune))


def _name(service: Mapping[str, Any]) -> str:
    return str(service["metadata"]["name"])


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def service_aligned(existing: Mapping[str, Any], wanted: Mapping[str, Any], manager: str) -> bool:
    """True when applying ``wanted`` as ``manager`` would change nothing in ``existing``
    (:func:`~gpustack_render.reconcile.applied.apply_aligned` on the main resource).

    Two halves: every rendered field is stored with the rendered value, and the field set
    ``manager`` owns through server-side apply (``metadata.managedFields``) names nothing the
    rendering dropped — a label, annotation, port or selector key removed from the rendering is
    still stored and still ours, and only a new apply removes it. A Service without an apply
    entry of ``manager`` is not known to be aligned.
    """
    return apply_aligned(existing, wanted, manager)
