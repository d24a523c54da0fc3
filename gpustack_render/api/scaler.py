"""The ``ModelDeploymentScaler`` kind (group ``worker.gpustack.ai``, version ``v1``): the scale
target of one External role (``<md>-<role>``) or one ratio group (``<md>-<group>``) of a
ModelDeployment (D27, docs/autoscaling.md).

The controller creates it, owned by the deployment, with ``spec.replicas`` at the count the
role (the group, in units) runs; from then on ``spec.replicas`` belongs to whoever scales it
(an HPA, KEDA, ``kubectl scale``) through the ``scale`` subresource. The controller keeps the
bounds and the target in step with the deployment and reports the status: the count ready,
admitted and waiting for quota, and the selector of the serving Pods the HPA reads metrics
through.
"""

# Annotations are objects, not strings: see the note in common.py.

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field

from gpustack_render.api.common import (
    Condition,
    Int32,
    Int64,
    ObjectMeta,
    SpecModel,
    list_map,
)
from gpustack_render.api.modeldeployment import MAX_REPLICAS, ROLE_NAME_PATTERN, StatusModel

KIND = "ModelDeploymentScaler"

#: A write that leaves ``replicas`` as it was passes the count rules (``optionalOldSelf``).
_UNCHANGED = "(oldSelf.hasValue() && oldSelf.value().replicas == self.replicas)"
#: Where the bounds come from, for the refusals.
_WHERE = (
    "the ModelDeployment sets this scaler's bounds: roles[].scaling.minReplicas/maxReplicas of an "
    "External role, minUnits/maxUnits of a scaling group (kubectl get mdscaler shows them)"
)
#: The CEL rules on ``spec``: the API server runs them on every write, ``/scale`` included
#: (tests/integration/test_scaler_crd.py), so an autoscaler asking for a count outside the
#: bounds gets a clear refusal. A write that leaves ``replicas`` as it was is always allowed: the
#: controller narrowing the bounds never needs to touch the count. The messages are static: a
#: ``messageExpression`` converting the numbers to text is estimated far above the API server's
#: cost budget (it refuses the CRD), so the messages name the bound instead of its value.
SPEC_RULES: list[dict[str, Any]] = [
    {
        "rule": "self.minReplicas <= self.maxReplicas",
        "message": "minReplicas must not exceed maxReplicas",
    },
    {
        "rule": "has(self.role) != has(self.scalingGroup)",
        "message": "exactly one of role and scalingGroup is set",
    },
    {
        "rule": f"{_UNCHANGED} || self.replicas <= self.maxReplicas",
        "message": f"replicas is above maxReplicas: {_WHERE}",
        "optionalOldSelf": True,
        "fieldPath": ".replicas",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": f"{_UNCHANGED} || self.replicas == 0 || self.replicas >= self.minReplicas",
        "message": f"replicas is below minReplicas: {_WHERE}",
        "optionalOldSelf": True,
        "fieldPath": ".replicas",
        "reason": "FieldValueInvalid",
    },
    {
        "rule": f"{_UNCHANGED} || self.replicas != 0 || self.minReplicas == 0",
        "message": "scale to zero is not allowed: minReplicas is above 0; set "
        "roles[].scaling.minReplicas (minUnits of a scaling group) to 0 in the ModelDeployment "
        "to allow it",
        "optionalOldSelf": True,
        "fieldPath": ".replicas",
        "reason": "FieldValueInvalid",
    },
]


class ScalerSpec(SpecModel):
    """The desired count and what it scales; the bounds are the deployment's."""

    replicas: Annotated[
        Int32,
        Field(
            ge=0,
            le=MAX_REPLICAS,
            description="The desired count: replicas of the role, or units of the group. Written "
            "by the autoscaler through /scale; the controller sets it only when it creates the "
            "object.",
        ),
    ]
    min_replicas: Annotated[
        Int32,
        Field(
            ge=0,
            le=MAX_REPLICAS,
            description="The fewest replicas (units) accepted: roles[].scaling.minReplicas or "
            "the group's minUnits. Kept by the controller.",
        ),
    ] = 1
    max_replicas: Annotated[
        Int32,
        Field(
            ge=0,
            le=MAX_REPLICAS,
            description="The most replicas (units) accepted: roles[].scaling.maxReplicas or the "
            "group's maxUnits. Kept by the controller.",
        ),
    ] = MAX_REPLICAS
    model_deployment: Annotated[
        str,
        Field(min_length=1, max_length=253, description="The ModelDeployment in this namespace."),
    ]
    role: Annotated[
        str | None,
        Field(max_length=63, pattern=ROLE_NAME_PATTERN, description="The External role scaled."),
    ] = None
    scaling_group: Annotated[
        str | None,
        Field(
            max_length=63,
            pattern=ROLE_NAME_PATTERN,
            description="The ratio group scaled (spec.scalingGroups[].name); replicas count units.",
        ),
    ] = None


class ScalerStatus(StatusModel):
    """What the controller observed of the target's replicas (units for a group)."""

    replicas: Annotated[
        Int32 | None,
        Field(
            description="Ready replicas (units): every Pod of the replica Ready (of every replica "
            "of the unit). What /scale reports, so an autoscaler does not pile on while new "
            "replicas wait."
        ),
    ] = None
    selector: Annotated[
        str | None,
        Field(
            description="The label selector of the target's serving Pods (each replica's leader, "
            "member 0); /scale reports it and the HPA reads Pod metrics through it."
        ),
    ] = None
    desired: Annotated[
        Int32 | None,
        Field(description="The count the controller applies: spec.replicas within the bounds."),
    ] = None
    admitted: Annotated[
        Int32 | None,
        Field(
            description="Replicas (units) Kueue admitted now; a unit counts once every "
            "replica of it is admitted."
        ),
    ] = None
    ready: Annotated[Int32 | None, Field(description="Ready replicas (units); as replicas.")] = None
    quota_pending: Annotated[
        Int32 | None,
        Field(
            description="Desired replicas (units) with a Workload waiting for quota in the "
            "ClusterQueue (QuotaReserved not True)."
        ),
    ] = None
    conditions: Annotated[
        list[Condition] | None,
        Field(
            json_schema_extra=list_map("type"),
            description="QuotaReserved: whether every desired replica (unit) holds quota, and "
            "when not, the ClusterQueue and the resource it lacks.",
        ),
    ] = None
    observed_generation: Annotated[
        Int64 | None,
        Field(description="The metadata.generation this status was computed from."),
    ] = None


class ModelDeploymentScaler(SpecModel):
    """The scale target of one External role or one ratio group of a ModelDeployment: an HPA,
    KEDA or kubectl scale sets spec.replicas through the scale subresource, the controller
    creates the replicas (whole units for a group) and reports what Kueue admitted."""

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True, frozen=True)

    api_version: Annotated[Literal["worker.gpustack.ai/v1"], Field(alias="apiVersion")] = (
        "worker.gpustack.ai/v1"
    )
    kind: Literal["ModelDeploymentScaler"] = "ModelDeploymentScaler"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: Annotated[
        ScalerSpec,
        Field(
            json_schema_extra={"x-kubernetes-validations": SPEC_RULES},
            description="The desired count and what it scales.",
        ),
    ]
    status: ScalerStatus | None = None
