"""The ModelDeploymentScalers a deployment renders (D27, docs/autoscaling.md).

One per scale target (``deployment/scaling.py``): ``<md>-<role>`` for an External role,
``<md>-<group>`` for a ratio group, owned by the deployment. ``spec.replicas`` is the count the
target runs in this rendering (units for a group): what the controller creates the object
with, and never writes again; the bounds and the target are the deployment's and are kept in
step. The status (the serving Pods' selector among it) is the controller's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from gpustack_render.api.common import API_VERSION
from gpustack_render.api.scaler import KIND as SCALER_KIND
from gpustack_render.core.labels import INSTANCE, NAME, NAME_VALUE, PART_OF, PART_OF_VALUE
from gpustack_render.deployment.scaling import ScaleTarget

#: The spec fields the controller keeps in step on an existing scaler (never ``replicas``).
KEPT_SPEC_FIELDS: Final = ("minReplicas", "maxReplicas", "modelDeployment", "role", "scalingGroup")


def scaler_manifest(
    target: ScaleTarget,
    *,
    deployment: str,
    namespace: str,
    counts: Mapping[str, int],
    owner_references: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """The scaler of ``target``; ``counts`` are the roles' replicas in this rendering."""
    spec: dict[str, Any] = {
        "replicas": target.units_of(counts),
        "minReplicas": target.min_replicas,
        "maxReplicas": target.max_replicas,
        "modelDeployment": deployment,
    }
    spec["scalingGroup" if target.group else "role"] = target.name
    meta: dict[str, Any] = {
        "name": target.scaler_name(deployment),
        "namespace": namespace,
        "labels": {NAME: NAME_VALUE, INSTANCE: deployment, PART_OF: PART_OF_VALUE},
    }
    if owner_references:
        meta["ownerReferences"] = [dict(ref) for ref in owner_references]
    return {"apiVersion": API_VERSION, "kind": SCALER_KIND, "metadata": meta, "spec": spec}
