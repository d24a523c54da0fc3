"""What the stored router Deployment says about the router (``RouterReady``, ``roleSummary``'s
``R``; D26). The router's objects are written on the owned-object path (``reconcile/owned.py``)
like every other kind the controller keeps.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview, ownerrefs


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
