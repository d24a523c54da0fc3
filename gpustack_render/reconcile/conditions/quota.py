"""``QuotaReserved``: whether Kueue reserved quota for every declared replica, and what holds
the ones that wait (docs/contract/controller.md §14, the first matching row wins)."""

from __future__ import annotations

from collections.abc import Sequence

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import (
    SCALED_TO_ZERO,
    ConditionVerdict,
    declared_replicas,
)
from gpustack_render.reconcile.jointcheck import CHECK_NAME as JOINT_CHECK
from gpustack_render.reconcile.quotashortfall import shortfall
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.rendering.renderer import Rendering

#: ``QuotaReserved`` reasons another rule reads (the summary conditions, the phase message).
LOCAL_QUEUE_CONFLICT = "LocalQueueConflict"
PARKED = "Parked"
NO_QUEUE_IN_RESERVED_NAMESPACE = "NoQueueInReservedNamespace"


def _queue_of(rendering: Rendering, role: str) -> str:
    r = rendering.role(role)
    return r.queue if r is not None else ""


def _size_of(rendering: Rendering, role: str) -> int:
    r = rendering.role(role)
    return r.size if r is not None else 1


def quota_reserved(  # noqa: C901 (the QuotaReserved table, first matching row wins, read top to bottom)
    md: ModelDeployment,
    rendering: Rendering,
    index: ReplicaIndex,
    *,
    system_namespace: str,
    queue_conflicts: Sequence[str] = (),
) -> ConditionVerdict:
    """``QuotaReserved``: the first matching row of docs/contract/controller.md §14.

    ``queue_conflicts`` are the messages of the LocalQueues found feeding another ClusterQueue
    (``reconcile/queues.py``)."""
    if queue_conflicts:
        return ConditionVerdict(
            ConditionStatus.FALSE, LOCAL_QUEUE_CONFLICT, "; ".join(queue_conflicts)
        )
    replicas = declared_replicas(rendering, index)
    workloads = index.owned_workloads()
    declared = sum(r.replicas for r in rendering.roles)
    preempted = [w for w in workloads if w.preempted]
    admitted = [r for r in replicas if r.admitted]
    note = ""
    if preempted:
        names = ", ".join(sorted(w.name for w in preempted))
        note = f"; Kueue preempted {len(preempted)} replica(s) (Workload {names})"
    parked = [
        w
        for w in workloads
        if not w.active
        and w.checks.get(JOINT_CHECK) is not None
        and w.checks[JOINT_CHECK].state == "Pending"
    ]
    if parked:
        # Every deactivated Workload of the set: parking deactivates them all at once.
        names = ", ".join(sorted(w.name for w in workloads if not w.active))
        return ConditionVerdict(
            ConditionStatus.FALSE,
            PARKED,
            f"the deployment is parked: its Workloads ({names}) were deactivated after waiting "
            "for the joint admission check, and no longer ask for quota; free the capacity and "
            "reactivate them, or delete and recreate the deployment" + note,
        )
    if preempted and admitted:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "PreemptedInPart",
            f"{len(admitted)} of {declared} replicas are admitted while Kueue preempted "
            f"{len(preempted)}{note}",
        )
    if declared == 0 and not index.live:
        return ConditionVerdict(
            ConditionStatus.TRUE,
            SCALED_TO_ZERO,
            "every role is scaled to zero by its ModelDeploymentScaler: no replica holds or "
            "asks for quota" + note,
        )
    if not index.owned:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN, "NoReplicas", "no replica Pod exists yet" + note
        )
    if not index.live:
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "AllReplicasTerminating",
            f"all {len(index.terminating)} replica Pods are terminating" + note,
        )
    for replica in replicas:
        expected = replica.expected(_size_of(rendering, replica.role))
        if len(replica.pods) < expected:
            queue = _queue_of(rendering, replica.role)
            return ConditionVerdict(
                ConditionStatus.FALSE,
                "PodGroupIncomplete",
                f"role {replica.role} replica {replica.ordinal} has {len(replica.pods)} of "
                f"{expected} Pods; Kueue waits for the whole group in queue {queue}" + note,
            )
    if (md.metadata.namespace or "") == system_namespace:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            NO_QUEUE_IN_RESERVED_NAMESPACE,
            f"namespace {system_namespace} is the controller's own: no LocalQueue is created "
            "there, so Kueue admits nothing; deploy into another namespace" + note,
        )
    without = [r for r in replicas if not r.workloads]
    if without:
        first = without[0]
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "AdmissionInFlight",
            f"{len(without)} replica(s) have no Workload yet (role {first.role} replica "
            f"{first.ordinal}); Kueue composes one per complete group" + note,
        )
    reserved = [r for r in replicas if r.quota_reserved]
    if len(reserved) == declared:
        queue = ""
        if len(rendering.roles) == 1:
            queue = f" in queue {rendering.roles[0].queue}"
        return ConditionVerdict(
            ConditionStatus.TRUE,
            "Reserved",
            f"{declared} of {declared} replicas reserved quota{queue}" + note,
        )
    waiting_roles = sorted(
        {r.role for r in replicas if not r.quota_reserved}
        | {
            role.name
            for role in rendering.roles
            if len(index.replicas_of(role.name, role.replicas)) < role.replicas
        }
    )
    if len(rendering.roles) == 1:
        where = f"in queue {rendering.roles[0].queue}"
    else:
        where = "roles " + ", ".join(waiting_roles)
    downstream = []
    for replica in replicas:
        for wl in replica.workloads:
            for name, check in sorted(wl.checks.items()):
                if check.state != "Ready" and check.message:
                    downstream.append(
                        f"role {replica.role} replica {replica.ordinal} Workload {wl.name} "
                        f"check {name}: {check.message}"
                    )
    message = f"{declared - len(reserved)} of {declared} replicas wait for quota {where}"
    short = shortfall(rendering, [r for r in replicas if r.quota_pending])
    if short:
        message += "; " + short
    if downstream:
        message += "; " + "; ".join(downstream)
    return ConditionVerdict(ConditionStatus.FALSE, "Pending", message + note)
