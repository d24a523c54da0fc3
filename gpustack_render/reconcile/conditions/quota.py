"""``QuotaReserved``: whether Kueue reserved quota for every declared replica, and what holds
the ones that wait (docs/contract/controller.md §14, the first matching row wins)."""

from __future__ import annotations

from collections.abc import Sequence

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.conditions.common import (
    QUOTED_CHARS,
    SCALED_TO_ZERO,
    ConditionVerdict,
    declared_replicas,
    few,
)
from gpustack_render.reconcile.jointcheck import CHECK_NAME as JOINT_CHECK
from gpustack_render.reconcile.quotashortfall import (
    lacking,
    no_node_for_admitted,
    no_room,
    shortfall,
    split_pending,
    unplaced,
)
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex
from gpustack_render.rendering.renderer import Rendering

#: ``QuotaReserved`` reasons another rule reads (the summary conditions, the phase message).
LOCAL_QUEUE_CONFLICT = "LocalQueueConflict"
PARKED = "Parked"
#: Replicas wait for quota: the ClusterQueue cannot hold them (Kueue's ``Pending``).
PENDING = "Pending"
#: Replicas wait although the ClusterQueue has the quota: no node has room for their Pods.
NODES_FULL = "NodesFull"
NO_QUEUE_IN_RESERVED_NAMESPACE = "NoQueueInReservedNamespace"


def _queue_of(rendering: Rendering, role: str) -> str:
    r = rendering.role(role)
    return r.queue if r is not None else ""


def _size_of(rendering: Rendering, role: str) -> int:
    r = rendering.role(role)
    return r.size if r is not None else 1


def quota_reserved(
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
        names = few(sorted(w.name for w in preempted))
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
        inactive = sorted(w.name for w in workloads if not w.active)
        return ConditionVerdict(
            ConditionStatus.FALSE,
            PARKED,
            f"the deployment is parked: its {len(inactive)} Workload(s) ({few(inactive)}) were "
            "deactivated after waiting for the joint admission check, and no longer ask for "
            "quota; free the capacity and reactivate them, or delete and recreate the deployment"
            + note,
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
    return _waiting(
        rendering, replicas, declared=declared, reserved=len(reserved), where=where, note=note
    )


def _checks_waiting(replicas: Sequence[Replica]) -> str:
    """The downstream admission checks that are not ``Ready`` and say why: how many replicas,
    the first few, and the first one's words in full (the others are alike)."""
    found = []
    for replica in replicas:
        for wl in replica.workloads:
            for name, check in sorted(wl.checks.items()):
                if check.state != "Ready" and check.message:
                    found.append((replica, wl.name, name, check.message))
    if not found:
        return ""
    replica, workload, name, message = found[0]
    first = (
        f"role {replica.role} replica {replica.ordinal} Workload {workload} check {name}: "
        f"{message[:QUOTED_CHARS]}"
    )
    if len(found) == 1:
        return first
    held = list(dict.fromkeys(f"{r.role} {r.ordinal}" for r, _, _, _ in found))
    return f"admission checks hold {len(held)} replica(s) ({few(held)}); the first: {first}"


def _waiting(
    rendering: Rendering,
    replicas: Sequence[Replica],
    *,
    declared: int,
    reserved: int,
    where: str,
    note: str = "",
) -> ConditionVerdict:
    """The last row: some replicas hold no quota. Kueue's words on their Workloads tell a
    ClusterQueue short of quota (reason ``Pending``) from nodes with no room for the Pods
    (reason :data:`NODES_FULL`: the quota is there); the detail is in the message, the brief
    form in ``summary`` (docs/autoscaling.md "What status tells when capacity runs out")."""
    for_quota, for_nodes = split_pending([r for r in replicas if r.quota_pending])
    waiting = declared - reserved
    if for_nodes and not for_quota:
        head = (
            f"{len(for_nodes)} of {declared} replicas wait for room on a node, not for quota "
            f"({where})"
        )
        brief = head
        reason = NODES_FULL
    else:
        head = f"{waiting} of {declared} replicas wait for quota {where}"
        if for_nodes:
            head += f" ({len(for_nodes)} of them for room on a node, not for quota)"
        brief = head
        if for_quota:
            brief += ": " + lacking(rendering, for_quota)
        reason = PENDING
    detail = [head]
    if for_quota:
        detail.append(
            shortfall(rendering, for_quota)
            + "; they stay queued until the ClusterQueue has room: raise its nominalQuota, "
            "free quota it holds, or lower the replicas"
        )
    if for_nodes:
        detail.append(
            no_room(rendering, for_nodes)
            + "; free or add nodes (kubectl describe nodes shows what is allocated), or lower "
            "the replicas: more quota does not help"
        )
    checks = _checks_waiting(replicas)
    if checks:
        detail.append(checks)
    message = "; ".join(detail) + note
    return ConditionVerdict(
        ConditionStatus.FALSE, reason, message, summary=brief if brief != message else ""
    )


def no_node_yet(rendering: Rendering, index: ReplicaIndex) -> str:
    """What keeps replicas that hold quota from running: the scheduler finds no node with room
    for one of their Pods (``quotashortfall.unplaced``); empty when nothing is held so. The
    summary conditions say it (``readiness``): ``QuotaReserved`` is ``True`` then."""
    replicas = declared_replicas(rendering, index)
    declared = sum(r.replicas for r in rendering.roles)
    return no_node_for_admitted(unplaced(replicas), declared)
