"""Why a replica is not serving, and which running replicas an upgrade rolls (docs/explain.md,
"Observed state").

A replica serves when every member Pod is live and Ready (``status.roles[].ready``,
docs/contract/controller.md §13). For each declared replica that does not, the reasons are read
from its Pods and Workloads in the order a replica meets them on its way to serving: the edit
refused by admission, the replica missing or broken, queued by Kueue (the Workload's own
condition reason and message), held by the joint admission check (the roles that lack quota),
parked, scheduling gates, unschedulable, not Ready.

Upgrade impact compares each running replica with what this renderer renders for its seats now
(docs/contract/render.md §7): a pod-spec-hash that differs, or a render-version below the floor,
rolls the replica; a render-version at or above the floor but below the current baseline is
compatible and stays.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpustack_render.core import jsonview
from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.jointcheck import (
    CHECK_NAME,
    PENDING,
    CheckVerdict,
    JointDeployment,
    joint_verdict,
    needs_verdict,
)
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.queues import cluster_queue_of
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex
from gpustack_render.reconcile.rollout import Desired, DesiredRole, RoleStep, RolloutStep

#: Reason kinds, in the order a replica's reasons are listed.
REFUSED = "refused"
MISSING = "missing"
BROKEN = "broken"
QUEUED = "queued"
JOINT_CHECK = "joint-check"
PARKED = "parked"
GATED = "gated"
UNSCHEDULABLE = "unschedulable"
NOT_READY = "not-ready"
REASON_KINDS = (
    REFUSED,
    MISSING,
    BROKEN,
    QUEUED,
    JOINT_CHECK,
    PARKED,
    GATED,
    UNSCHEDULABLE,
    NOT_READY,
)

#: The ``PodScheduled=False`` reason of a Pod that still carries scheduling gates.
SCHEDULING_GATED = "SchedulingGated"

WILL_ROLL = "will roll"
STAYS = "stays"

#: Without a clock the joint check is asked at a moment no wait has outlasted: parking is read
#: from the observed Workloads (inactive, check entry Pending), never predicted.
_NO_CLOCK = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Reason:
    """One link of a replica's reason chain (``kind`` is one of :data:`REASON_KINDS`)."""

    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class ReplicaReasons:
    """A declared replica that is not serving, and why, in chain order."""

    role: str
    ordinal: int
    reasons: tuple[Reason, ...]


@dataclass(frozen=True, slots=True)
class Impact:
    """A running replica whose Pods differ from what this renderer renders now."""

    role: str
    ordinal: int
    #: :data:`WILL_ROLL` or :data:`STAYS`.
    verdict: str
    reason: str
    pods: tuple[str, ...]
    #: The lowest render-version among its Pods.
    render_version: int
    #: Every member's pod-spec-hash is its seat's.
    hash_matches: bool


@dataclass(frozen=True, slots=True)
class Queues:
    """The LocalQueues and ClusterQueues the observed state holds, by name."""

    local: Mapping[str, Mapping[str, Any]]
    cluster: Mapping[str, Mapping[str, Any]]
    #: Whether any LocalQueue was given at all (a missing one is then worth saying).
    listed_local: bool = False


def upgrade_impact(desired: Desired, index: ReplicaIndex) -> tuple[Impact, ...]:
    """Each live replica at a declared ordinal that is outdated (will roll) or runs an older
    but compatible render-version (stays), in role then ordinal order."""
    out: list[Impact] = []
    floor, current = desired.floor, desired.render_version
    for role in desired.roles:
        for ordinal in range(role.replicas):
            replica = index.replica(role.name, ordinal)
            if replica is None:
                continue
            pods = replica.pods
            lowest = min(p.render_version for p in pods)
            differs = [p for p in pods if p.pod_spec_hash != role.seat_hash(ordinal, p.member)]
            reasons = []
            if differs:
                which = f" of {len(differs)} of {len(pods)} Pods" if len(pods) > 1 else ""
                reasons.append(
                    f"pod-spec-hash{which} differs from what this renderer renders for the seat"
                )
            if lowest < floor:
                reasons.append(
                    f"render-version {lowest} is below the floor {floor} (min-render-version)"
                )
            if reasons:
                verdict, reason = WILL_ROLL, "; ".join(reasons)
            elif lowest < current:
                verdict = STAYS
                reason = (
                    f"render-version {lowest} is older than the current {current} but not "
                    f"below the floor {floor}: compatible, kept until something else rolls it"
                )
            else:
                continue
            out.append(
                Impact(
                    role.name,
                    ordinal,
                    verdict,
                    reason,
                    tuple(p.name for p in pods),
                    lowest,
                    not differs,
                )
            )
    return tuple(out)


def replica_reasons(
    desired: Desired,
    index: ReplicaIndex,
    next_pass: RolloutStep,
    *,
    joint: JointDeployment | None,
    queues: Queues,
    refused: Sequence[str] = (),
    park_after: int,
    now: datetime | None = None,
    queue_conflicts: Mapping[str, OwnedConflict] | None = None,
) -> tuple[ReplicaReasons, ...]:
    """The reason chain of every declared replica that is not serving. ``joint`` is the
    deployment as the joint check reads it (``None``: a single role, nothing joint);
    ``queue_conflicts`` the LocalQueues found feeding another ClusterQueue, by name (the
    planner creates no Pod of a role using one)."""
    verdicts: dict[str, CheckVerdict] = {}

    def verdict(workload: ObservedWorkload) -> CheckVerdict | None:
        if joint is None or not needs_verdict(workload):
            return None
        if workload.name not in verdicts:
            verdicts[workload.name] = joint_verdict(
                workload=workload,
                deployment=joint,
                now=now if now is not None else _NO_CLOCK,
                park_after=park_after,
            )
        return verdicts[workload.name]

    out: list[ReplicaReasons] = []
    for role in desired.roles:
        step = next_pass.role(role.name)
        for ordinal in range(role.replicas):
            replica = index.replica(role.name, ordinal)
            if replica is not None and replica.serving(role.size):
                continue
            chain: list[Reason] = []
            if refused:
                chain.append(
                    Reason(
                        REFUSED,
                        "admission refuses the edit, so the controller keeps reconciling the "
                        "stored object: " + "; ".join(refused),
                    )
                )
            if replica is None:
                chain.append(
                    _missing(
                        role,
                        ordinal,
                        index,
                        next_pass,
                        waiting=step,
                        conflicts=queue_conflicts or {},
                    )
                )
            else:
                chain.extend(_links(role, replica, queues, verdict))
            out.append(ReplicaReasons(role.name, ordinal, tuple(chain)))
    return tuple(out)


def _missing(
    role: DesiredRole,
    ordinal: int,
    index: ReplicaIndex,
    next_pass: RolloutStep,
    *,
    waiting: RoleStep | None,
    conflicts: Mapping[str, OwnedConflict],
) -> Reason:
    leaving = index.leaving_at(role.name, ordinal)
    said = f"no live Pod; {len(leaving)} still terminating" if leaving else "no live Pod"
    if any(s.role == role.name and s.ordinal == ordinal for s in next_pass.create):
        return Reason(MISSING, f"{said}: the next pass creates it")
    if any(s.role == role.name and s.ordinal == ordinal for s in next_pass.blocked):
        return Reason(MISSING, f"{said}: it is not created while {conflicts[role.queue].message}")
    if waiting is not None and ordinal in waiting.waiting_ordinals:
        group = role.groups[ordinal] if ordinal < len(role.groups) else ""
        return Reason(
            MISSING,
            f"{said}: it is created once nothing holds its group name {group} any more",
        )
    return Reason(MISSING, f"{said}: it is created once this role's deletions are done")


def _links(
    role: DesiredRole,
    replica: Replica,
    queues: Queues,
    verdict: Callable[[ObservedWorkload], CheckVerdict | None],
) -> list[Reason]:
    chain: list[Reason] = []
    live = replica.pods
    want = replica.expected(role.size)
    failed = [p.name for p in live if p.failed]
    complete = replica.complete(role.size)
    if not complete or failed:
        parts = []
        if len(live) != want:
            parts.append(f"{len(live)} of {want} member Pods")
        elif not complete:
            members = ", ".join(str(p.member) for p in live)
            parts.append(f"member indexes {members}, where each of 0..{want - 1} is wanted once")
        if failed:
            parts.append(f"Failed member(s) {', '.join(failed)}")
        chain.append(Reason(BROKEN, "; ".join(parts) + ": the planner replaces it first (tier a)"))
    if not replica.admitted:
        chain.extend(_kueue(live, want, replica.workloads, queues, verdict))
    gated = sorted({g for p in live for g in p.scheduling_gates})
    if gated:
        count = sum(1 for p in live if p.scheduling_gates)
        chain.append(
            Reason(
                GATED, f"{count} of {len(live)} Pod(s) carry scheduling gate(s) {', '.join(gated)}"
            )
        )
    for pod in live:
        # A gated Pod reads PodScheduled=False SchedulingGated: the gates above say it.
        if pod.unscheduled_reason != SCHEDULING_GATED and (
            pod.unscheduled_reason or pod.unscheduled_message
        ):
            subject = f"Pod {pod.name} PodScheduled=False"
            said = _said(subject, pod.unscheduled_reason, pod.unscheduled_message)
            chain.append(Reason(UNSCHEDULABLE, said))
    not_ready = [p for p in live if not p.ready]
    if not_ready:
        chain.append(Reason(NOT_READY, "; ".join(_not_ready(p) for p in not_ready)))
    return chain


def _kueue(
    live: Sequence[ObservedPod],
    want: int,
    workloads: Sequence[ObservedWorkload],
    queues: Queues,
    verdict: Callable[[ObservedWorkload], CheckVerdict | None],
) -> list[Reason]:
    if not workloads:
        if len(live) < want:
            text = f"no Workload yet: Kueue waits for the whole group ({len(live)} of {want} Pods)"
        else:
            text = "no Workload yet: Kueue composes one per complete group"
        return [Reason(QUEUED, text)]
    chain: list[Reason] = []
    for wl in workloads:
        check = wl.checks.get(CHECK_NAME)
        parked = not wl.active and check is not None and check.state == PENDING
        if wl.evicted:
            subject = f"Workload {wl.name} Evicted"
            chain.append(Reason(QUEUED, _said(subject, wl.evicted_reason, wl.evicted_message)))
        elif not wl.quota_reserved and not parked:
            if wl.quota_reason or wl.quota_message:
                subject = f"Workload {wl.name} QuotaReserved=False"
                text = _said(subject, wl.quota_reason, wl.quota_message)
            else:
                text = f"Workload {wl.name} waits for quota (no QuotaReserved condition yet)"
            if not wl.active:
                text += "; it is deactivated (spec.active: false)"
            chain.append(Reason(QUEUED, text + _queue_note(wl.queue, queues)))
        elif wl.quota_reserved:
            chain.extend(_checks(wl, verdict(wl)))
        if parked:
            said = f": {check.message}" if check is not None and check.message else ""
            chain.append(
                Reason(
                    PARKED,
                    f"Workload {wl.name} is deactivated after waiting for the joint admission "
                    f"check{said}",
                )
            )
    return chain


def _checks(wl: ObservedWorkload, held: CheckVerdict | None) -> list[Reason]:
    """Quota is reserved but the Workload is not admitted: its admission checks hold it."""
    chain: list[Reason] = []
    if held is not None and held.state == PENDING:
        roles = f" (lacking quota: role(s) {', '.join(held.roles)})" if held.roles else ""
        chain.append(Reason(JOINT_CHECK, f"Workload {wl.name}{roles}: {held.message}"))
    for name, entry in sorted(wl.checks.items()):
        if entry.state != "Ready" and name != CHECK_NAME:
            subject = f"Workload {wl.name} admission check {name}"
            chain.append(Reason(QUEUED, _said(subject, entry.state, entry.message)))
    if not chain and (wl.admitted_reason or wl.admitted_message):
        subject = f"Workload {wl.name} Admitted=False"
        chain.append(Reason(QUEUED, _said(subject, wl.admitted_reason, wl.admitted_message)))
    return chain


def _said(subject: str, reason: str, message: str) -> str:
    """``subject reason: message``, leaving out what is empty."""
    head = f"{subject} {reason}" if reason else subject
    return f"{head}: {message}" if message else head


def _queue_note(queue: str, queues: Queues) -> str:
    if not queue:
        return ""
    local = queues.local.get(queue)
    if local is None:
        return f"; LocalQueue {queue} is not in the observed state" if queues.listed_local else ""
    cq_name = cluster_queue_of(local)
    cq = queues.cluster.get(cq_name)
    if cq is None:
        return ""
    for cond in jsonview.items(jsonview.view(cq.get("status")).get("conditions")):
        cond = jsonview.view(cond)
        if cond.get("type") == "Active" and cond.get("status") != ConditionStatus.TRUE:
            return _said(
                f"; ClusterQueue {cq_name} is not active",
                str(cond.get("reason") or ""),
                str(cond.get("message") or ""),
            )
    return ""


def _not_ready(pod: ObservedPod) -> str:
    parts = [pod.phase]
    if pod.waiting_reasons:
        parts.append(", ".join(pod.waiting_reasons))
    if pod.restarts:
        parts.append(f"{pod.restarts} restart(s)")
    return f"Pod {pod.name} not Ready ({'; '.join(parts)})"
