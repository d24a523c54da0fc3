"""The status of a ModelDeploymentScaler, computed every pass from the same observation as the
deployment's (D27, docs/autoscaling.md, "What status tells").

Counted in the target's own units (replicas of an External role, units of a ratio group), over
the desired ones (ordinals below the count):

- ``ready`` (and ``replicas``, what ``/scale`` reports): every replica of the unit serves (all
  its Pods exist and are Ready);
- ``admitted``: every replica of the unit holds a Workload Kueue admitted now;
- ``quotaPending``: a replica of the unit has a Workload Kueue holds back for quota;
- ``selector``: the target's serving Pods (``deployment/scaling.serving_selector``);
- the ``QuotaReserved`` condition: ``True`` when every desired unit holds quota; ``False``,
  reason ``QuotaPending``, naming each ClusterQueue, the resource it lacks and Kueue's words
  (``quotashortfall.py``), when some wait for it; ``False``, reason ``NodesFull``, when the
  queue has the quota but Kueue finds no node with room for them; ``False``, reason
  ``Parked``, when the joint check deactivated a unit's Workloads; ``Unknown``, reason
  ``AdmissionInFlight``, while a new replica has no Workload yet.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from gpustack_render.api.common import Condition
from gpustack_render.api.scaler import ScalerStatus
from gpustack_render.core import jsonview
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.deployment.scaling import ScaleTarget, serving_selector
from gpustack_render.reconcile.admissionsets import AdmissionSets
from gpustack_render.reconcile.conditions.common import (
    ConditionVerdict,
    conditions_with_times,
    few,
)
from gpustack_render.reconcile.conditions.quota import NODES_FULL
from gpustack_render.reconcile.quotashortfall import no_room, shortfall, split_pending
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex
from gpustack_render.rendering.renderer import Rendering

QUOTA_RESERVED = "QuotaReserved"
SCALER_CONDITION_TYPES = (QUOTA_RESERVED,)


@dataclass(frozen=True, slots=True)
class UnitCounts:
    """A target's units by state."""

    desired: int
    ready: int
    admitted: int
    quota_pending: int
    #: The replicas of the desired units: those waiting for quota, those with no Workload yet,
    #: and the parked ones (inactive, held by the joint check).
    pending: tuple[Replica, ...] = ()
    assembling: int = 0
    parked: tuple[str, ...] = ()


def unit_counts(
    target: ScaleTarget, *, units: int, rendering: Rendering, index: ReplicaIndex
) -> UnitCounts:
    """The target's desired ``units`` counted by state, from the observation ``index``."""
    sets = AdmissionSets(tuple((r.name, r.replicas) for r in rendering.roles), (target,))
    size = {r.name: r.size for r in rendering.roles}
    ready = admitted = quota_pending = assembling = 0
    pending: list[Replica] = []
    parked: list[str] = []
    for slots in sets.units(target, units):
        replicas = [index.replica(role, ordinal) for role, ordinal in slots]
        present = [r for r in replicas if r is not None]
        whole = len(present) == len(slots)
        ready += whole and all(r.serving(size.get(r.role, 1)) for r in present)
        admitted += whole and all(r.admitted for r in present)
        waiting = [r for r in present if r.quota_pending]
        quota_pending += bool(waiting)
        pending.extend(waiting)
        assembling += any(r is None or not r.workloads for r in replicas)
        parked.extend(w.name for r in present for w in r.workloads if not w.active)
    return UnitCounts(
        desired=units,
        ready=ready,
        admitted=admitted,
        quota_pending=quota_pending,
        pending=tuple(pending),
        assembling=assembling,
        parked=tuple(sorted(set(parked))),
    )


def _what(target: ScaleTarget, count: int) -> str:
    noun = "unit(s)" if target.group else "replica(s)"
    where = f"scaling group {target.name}" if target.group else f"role {target.name}"
    return f"{count} {noun} of {where}"


def quota_condition(
    target: ScaleTarget, counts: UnitCounts, rendering: Rendering
) -> ConditionVerdict:
    """The scaler's ``QuotaReserved`` verdict (see the module docstring)."""
    if counts.desired == 0:
        return ConditionVerdict(
            ConditionStatus.TRUE, "ScaledToZero", f"{_what(target, 0)} desired: nothing to hold"
        )
    if counts.parked:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "Parked",
            f"{len(counts.parked)} Workload(s) ({few(counts.parked)}) were deactivated by the "
            "joint admission check after waiting for their unit to hold quota; they no longer "
            "ask for it. Scale down, or free the capacity and reactivate them (spec.active: true)",
        )
    if counts.quota_pending:
        for_quota, for_nodes = split_pending(counts.pending)
        said = "; ".join(
            part
            for part in (shortfall(rendering, for_quota), no_room(rendering, for_nodes))
            if part
        )
        if for_nodes and not for_quota:
            return ConditionVerdict(
                ConditionStatus.FALSE,
                NODES_FULL,
                f"{_what(target, counts.quota_pending)} of {counts.desired} wait for room on a "
                f"node, not for quota: {said}. They stay queued until a node has room; asking "
                "for more adds queued replicas only",
            )
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "QuotaPending",
            f"{_what(target, counts.quota_pending)} of {counts.desired} wait for quota: "
            f"{said}. They stay queued until the ClusterQueue has room; asking for more adds "
            "queued replicas only",
        )
    if counts.assembling:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "AdmissionInFlight",
            f"{_what(target, counts.assembling)} of {counts.desired} have no Workload yet; "
            "Kueue composes one per complete group",
        )
    return ConditionVerdict(
        ConditionStatus.TRUE,
        "Reserved",
        f"{_what(target, counts.desired)} hold quota",
    )


def scaler_status(
    target: ScaleTarget,
    *,
    deployment: str,
    units: int,
    rendering: Rendering,
    index: ReplicaIndex,
    previous: Any,
    generation: int | None,
    now: str,
) -> ScalerStatus:
    """The scaler's whole status; ``previous`` is its stored ``status`` (raw JSON, or
    anything: read leniently), whose conditions keep their ``lastTransitionTime`` while their
    status holds."""
    counts = unit_counts(target, units=units, rendering=rendering, index=index)
    before = _conditions(previous)
    conditions = conditions_with_times(
        {QUOTA_RESERVED: quota_condition(target, counts, rendering)},
        before,
        generation=generation,
        now=now,
        types=SCALER_CONDITION_TYPES,
    )
    return ScalerStatus(
        replicas=counts.ready,
        selector=serving_selector(deployment, target),
        desired=counts.desired,
        admitted=counts.admitted,
        ready=counts.ready,
        quota_pending=counts.quota_pending,
        conditions=conditions,
        observed_generation=generation,
    )


def _conditions(previous: Any) -> list[Condition]:
    """The stored conditions that read as conditions (any other entry is dropped)."""
    out = []
    for entry in jsonview.items(jsonview.view(previous).get("conditions")):
        try:
            out.append(Condition.model_validate(entry))
        except ValidationError:
            continue
    return out


def scaler_status_json(status: ScalerStatus) -> dict[str, Any]:
    """The wire form (camelCase, unset fields left out)."""
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def scaler_status_changed(stored: Any, new: ScalerStatus) -> bool:
    """True when the stored scaler's ``status`` (raw) differs from ``new`` on the wire."""
    return jsonview.view(stored) != scaler_status_json(new)


def stored_status(obj: Any) -> Any:
    """The ``status`` of a stored scaler object (raw)."""
    return jsonview.view(jsonview.view(obj).get("status"))
