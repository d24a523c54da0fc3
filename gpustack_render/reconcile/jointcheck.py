"""The joint multi-role admission check (docs/contract/controller.md §9; the seed's "Prefill and
decode").

Every replica of every role is its own Kueue pod group, so a multi-role deployment is held
together by an AdmissionCheck this project runs: it answers ``Ready`` for a Workload only once
every replica of the deployment has reserved quota (or is being rebuilt by this operator's own
rollout), and ``Pending`` otherwise. A ``Pending`` that settles unchanged, with quota reserved,
for the parking window (a Setting, 30 minutes by default) parks the deployment: every Workload of
its set that holds or asks for quota is deactivated so they stop asking for quota.

One replica's reservation can complete the set, so a change to a Workload that carries the check
sends every other Workload of the same deployment back to the check
(:func:`siblings_to_recheck`).

Everything here is pure: the verdict, the AdmissionCheck object, the Workload status entry to
apply and the Workloads to judge again. The caller passes ``now`` (an aware datetime); nothing
here reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from gpustack_render.api.modeldeployment import KIND, ModelDeployment
from gpustack_render.core import jsonview, ownerrefs
from gpustack_render.core.settings import DEFAULT_PARK_AFTER_SECONDS
from gpustack_render.core.vocabulary import ConditionStatus
from gpustack_render.reconcile.admissionsets import AdmissionSets, Slot, admission_sets
from gpustack_render.reconcile.keys import split_key
from gpustack_render.reconcile.observed import (
    CheckState,
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.ownerindex import OwnerIndex
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rolloutinputs import remembered_replacing
from gpustack_render.reconcile.scaling import resolve_scaling
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.kinds import KUEUE_API_VERSION

#: The AdmissionCheck's name; ClusterQueues serving ModelDeployments list it (D11).
CHECK_NAME: Final = "gpustack-model-deployment-joint"
#: ``spec.controllerName`` of the check, and the field manager of its Workload status writes.
CONTROLLER_NAME: Final = "worker.gpustack.ai/model-deployment-joint"
#: A settled ``Pending`` older than this parks the deployment (the Setting's default).
PARK_AFTER_SECONDS: Final = DEFAULT_PARK_AFTER_SECONDS
READY: Final = "Ready"
PENDING: Final = "Pending"


@dataclass(frozen=True, slots=True)
class JointDeployment:
    """The deployment a Workload belongs to, as the verdict reads it.

    ``roles`` are (name, replicas) in spec order; ``replacing`` is ``status.roles[].replacing``;
    ``pods`` and ``workloads`` are the deployment's owned Pods and the namespace's Workloads.
    ``sets`` splits the replicas into what is admitted together (autoscaled roles, D27);
    without it every replica is judged together.
    """

    name: str
    roles: Sequence[tuple[str, int]]
    pods: Sequence[ObservedPod]
    workloads: Sequence[ObservedWorkload]
    replacing: Mapping[str, int | None] = field(default_factory=dict)
    deleting: bool = False
    sets: AdmissionSets | None = None

    def admission_sets(self) -> AdmissionSets:
        return self.sets if self.sets is not None else admission_sets(self.roles)


@dataclass(frozen=True, slots=True)
class CheckVerdict:
    """The check's answer for one Workload; ``park`` asks to set ``spec.active: false`` on
    every Workload named in ``deactivate`` (the judged one among them)."""

    state: str
    message: str
    park: bool = False
    deactivate: tuple[str, ...] = ()
    #: The roles a ``Pending`` waits on, in spec order: those still assembling when any is,
    #: else those with a replica that has not reserved quota (what the message names).
    roles: tuple[str, ...] = ()


def needs_verdict(workload: ObservedWorkload) -> bool:
    """Act only on a Workload that holds a quota reservation, is not evicted, finished or
    being deleted, is active, not yet admitted, and lists this check."""
    return (
        workload.quota_reserved
        and not workload.evicted
        and not workload.deleting
        and not workload.finished
        and workload.active
        and not workload.admitted
        and CHECK_NAME in workload.checks
    )


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def waiting_since(workload: ObservedWorkload) -> datetime | None:
    """When the Workload started waiting on the check with quota reserved: the later of the
    check entry's ``Pending`` transition and the ``QuotaReserved=True`` transition (Kueue adds
    the entry as ``Pending`` as soon as the Workload maps to a ClusterQueue, before quota, and
    resets it on every eviction)."""
    entry = workload.checks.get(CHECK_NAME)
    if entry is None or entry.state != PENDING:
        return None
    times = [_parse_time(entry.last_transition_time), _parse_time(workload.quota_reserved_since)]
    known = [t for t in times if t is not None]
    return max(known) if known else None


def _to_deactivate(
    workload: ObservedWorkload, index: ReplicaIndex, own: Sequence[Slot]
) -> tuple[str, ...]:
    """The Workloads of the judged set that hold or ask for quota (active, unfinished, not being
    deleted), the judged one included, sorted by name: every one of the deployment when the
    judged replica is in the base set; only its own unit's not admitted ones otherwise (the
    base serves on, D27)."""
    if own:
        wls = [w for slot in own if (r := index.replica(*slot)) is not None for w in r.workloads]
        candidates = [w for w in wls if not w.admitted]
    else:
        candidates = index.owned_workloads()
    names = {w.name for w in candidates if w.active and not w.finished and not w.deleting}
    return tuple(sorted(names | {workload.name}))


def _judged_slot(workload: ObservedWorkload, index: ReplicaIndex) -> tuple[str | None, int | None]:
    """(role, ordinal) of the replica whose group ``workload`` is (of an owner Pod)."""
    for pod in index.owned:
        if pod.uid in workload.owner_pods:
            return pod.role, pod.ordinal
    return None, None


def _by_role(slots: Sequence[Slot]) -> list[tuple[str, list[int]]]:
    out: dict[str, list[int]] = {}
    for role, ordinal in slots:
        out.setdefault(role, []).append(ordinal)
    return list(out.items())


def reads_members(roles: int) -> bool:
    """Whether the verdict of a deployment with ``roles`` roles reads its Pods and Workloads:
    only with two roles or more (a single-role deployment's replicas are not one joint set, so
    each is ``Ready`` at once, :func:`joint_verdict`), and so whether an event of one of its
    Workloads sends the others back to the check."""
    return roles >= 2


def joint_verdict(
    *,
    workload: ObservedWorkload,
    deployment: JointDeployment | None,
    now: datetime,
    park_after: int = PARK_AFTER_SECONDS,
) -> CheckVerdict:
    """The check's state and message for ``workload`` (docs/contract/controller.md §9).

    ``deployment`` is ``None`` when the Workload's owner Pods have no controlling
    ModelDeployment. ``park_after`` is the Setting ``model-deployment-park-after-seconds``.
    Never ``Retry`` or ``Rejected``.
    """
    if deployment is None:
        return CheckVerdict(READY, "not a ModelDeployment replica: nothing to wait for")
    if not reads_members(len(deployment.roles)):
        return CheckVerdict(
            READY,
            f"ModelDeployment {deployment.name} has a single role: not one replica of a "
            "multi-role deployment, nothing to wait for",
        )
    index = ReplicaIndex.of(deployment.pods, deployment.workloads)
    sets = deployment.admission_sets()
    judged_role, judged_ordinal = _judged_slot(workload, index)
    own = sets.own(judged_role, judged_ordinal) if judged_role is not None else []
    total = 0
    reserved = 0
    waiting_roles: list[str] = []
    assembling: list[str] = []
    for role, ordinals in _by_role(sets.judged_with(judged_role, judged_ordinal)):
        role_waiting = False
        role_assembling = False
        for ordinal in ordinals:
            total += 1
            replica = index.replica(role, ordinal)
            members = replica.pods if replica is not None else ()
            wls = replica.workloads if replica is not None else ()
            leaving = index.leaving_at(role, ordinal)
            want = next((p.group_total for p in members if p.group_total), None) or len(members)
            if not members:
                role_assembling = True
            holds_quota = any(w.quota_reserved for w in wls)
            # Mid-rollout counts only for the slot this operator is rebuilding (its remembered
            # replacement, D6): a fresh deployment whose groups merely lack Workloads yet must
            # not be admitted role by role (per seed: all or nothing).
            rebuilding = (
                not deployment.deleting
                and deployment.replacing.get(role) == ordinal
                and (bool(leaving) or len(members) < want or not members or not wls)
            )
            if holds_quota or rebuilding:
                reserved += 1
            else:
                role_waiting = True
        if role_assembling:
            assembling.append(role)
        if role_waiting:
            waiting_roles.append(role)
    scope = _scope(sets, own)
    if reserved == total:
        if own:
            return CheckVerdict(
                READY,
                f"{scope} of ModelDeployment {deployment.name} and its base set have reserved "
                "quota or are being replaced by this operator's rollout",
            )
        return CheckVerdict(
            READY,
            f"every replica of ModelDeployment {deployment.name} has reserved quota or is being "
            "replaced by this operator's rollout",
        )
    waiting_on = tuple(assembling or waiting_roles)
    if assembling:
        message = (
            f"ModelDeployment {deployment.name}: role(s) {', '.join(assembling)} are still "
            "assembling; Kueue has no workload for them yet; this resolves as their replicas "
            "appear"
        )
    else:
        message = (
            f"ModelDeployment {deployment.name}: {reserved} of {total} replicas reserved quota; "
            f"role(s) {', '.join(waiting_roles)} still wait; the quota already reserved is kept "
            "while they wait"
        )
    if own:
        message += f" ({scope} is admitted with the base set only, whatever the other units do)"
    since = waiting_since(workload)
    if since is not None and (now - since).total_seconds() > park_after:
        deactivate = _to_deactivate(workload, index, own)
        return CheckVerdict(
            PENDING,
            f"{message}. The deployment is parked, not held: after waiting with quota reserved "
            f"for more than {_window(park_after)} its Workloads {', '.join(deactivate)} were "
            "deactivated and no longer ask for quota; re-applying the same deployment does not "
            "clear it. Free the capacity and reactivate the Workloads (spec.active: true), or "
            "delete and recreate the deployment",
            park=True,
            deactivate=deactivate,
            roles=waiting_on,
        )
    return CheckVerdict(PENDING, message, roles=waiting_on)


def _scope(sets: AdmissionSets, own: Sequence[Slot]) -> str:
    """How the message names the judged replica's own unit."""
    if not own:
        return "the base set"
    role, ordinal = own[0]
    for target in sets.targets:
        if role in target.role_names:
            if target.group:
                return f"unit {ordinal // target.per_unit(role)} of scaling group {target.name}"
            return f"replica {ordinal} of role {role}"
    return f"replica {ordinal} of role {role}"  # pragma: no cover - own comes from a target


def siblings_to_recheck(key: str, workload: ObservedWorkload, owners: OwnerIndex) -> list[str]:
    """The Workloads to judge again after the Workload ``key`` changed (docs/contract/controller.md
    §9): when it lists the check, one replica's reservation can complete the joint set, so every
    other Workload in its namespace owning a Pod of the same deployment(s) (sorted keys); none
    otherwise."""
    if CHECK_NAME not in workload.checks:
        return []
    namespace, _ = split_key(key)
    deployments = owners.deployments_owning(workload.owner_pods)
    return sorted(
        other
        for other in owners.workloads_of(deployments)
        if other != key and split_key(other)[0] == namespace
    )


def _window(seconds: int) -> str:
    return f"{seconds // 60} min" if seconds % 60 == 0 else f"{seconds} s"


def rfc3339(moment: datetime) -> str:
    """``2026-01-02T03:04:05Z`` (seconds precision, UTC), as Kubernetes writes times."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_entry_apply(
    *,
    namespace: str,
    workload: str,
    verdict: CheckVerdict,
    previous: CheckState | None,
    now: datetime,
) -> dict[str, Any]:
    """The server-side apply body of the Workload's one ``status.admissionChecks[]`` entry;
    ``lastTransitionTime`` moves only when the state changes."""
    when = (
        previous.last_transition_time
        if previous is not None
        and previous.state == verdict.state
        and previous.last_transition_time
        else rfc3339(now)
    )
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": {"name": workload, "namespace": namespace},
        "status": {
            "admissionChecks": [
                {
                    "name": CHECK_NAME,
                    "state": verdict.state,
                    "lastTransitionTime": when,
                    "message": verdict.message[:32768],
                }
            ]
        },
    }


def admission_check_object() -> dict[str, Any]:
    """The AdmissionCheck this project ensures (docs/contract/controller.md §9)."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK_NAME},
        "spec": {"controllerName": CONTROLLER_NAME},
    }


def active_since(stored: Mapping[str, Any]) -> str | None:
    """When the stored AdmissionCheck last became ``Active=True`` (kept across restarts)."""
    since = None
    for cond in jsonview.items(jsonview.view(stored.get("status")).get("conditions")):
        cond = jsonview.view(cond)
        if cond.get("type") == "Active" and cond.get("status") == ConditionStatus.TRUE:
            since = cond.get("lastTransitionTime")
    return since if isinstance(since, str) else None


def verdict_changed(previous: CheckState | None, verdict: CheckVerdict) -> bool:
    """True when the Workload's stored entry does not already say ``verdict``."""
    return previous is None or (previous.state, previous.message) != (
        verdict.state,
        verdict.message,
    )


def owner_pods(workload: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The references to the Pods that own ``workload``."""
    return ownerrefs.owners_of_kind(workload, kind="Pod", api_version="v1")


def controlling_deployment(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The reference to the ModelDeployment that controls ``pod``, if one does."""
    return ownerrefs.controller_of(pod, kind=KIND)


@dataclass(frozen=True, slots=True)
class Uncertain:
    """The check cannot tell whose replica a Workload is: it looks again later and never
    answers ``Ready`` on that (docs/contract/controller.md §9)."""

    reason: str


def resolve_owner(
    workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any] | None]
) -> Mapping[str, Any] | Uncertain | None:
    """The controlling ModelDeployment reference of a Workload, from its owner Pods as read
    (``pods[i]`` answers ``owner_pods(workload)[i]``; ``None``: not found).

    ``None`` only when the Workload is positively not a ModelDeployment's replica: no Pod owns
    it at all, or a resolved owner Pod has no controlling ModelDeployment. No owner Pod
    resolving is :class:`Uncertain`."""
    refs = owner_pods(workload)
    if not refs:
        return None
    resolved = [p for p in pods if p is not None]
    for pod in resolved:
        md_ref = controlling_deployment(pod)
        if md_ref is not None:
            return md_ref
    if resolved:
        return None
    return Uncertain(f"none of its {len(refs)} owner Pod(s) could be read")


def resolve_deployment(
    md_ref: Mapping[str, Any], raw: Mapping[str, Any] | None
) -> ModelDeployment | Uncertain:
    """The ModelDeployment ``md_ref`` names, as read (``raw``; ``None``: not found). Gone,
    replaced (another uid) or undecodable is :class:`Uncertain`, never "not a replica"."""
    name = md_ref.get("name")
    if raw is None:
        return Uncertain(f"its ModelDeployment {name} is not found")
    if jsonview.view(raw.get("metadata")).get("uid") != md_ref.get("uid"):
        return Uncertain(f"its ModelDeployment {name} was replaced (another uid)")
    md, _ = decode_deployment(raw)
    if md is None:
        return Uncertain(f"its ModelDeployment {name} does not decode")
    return md


def joint_deployment(
    md: ModelDeployment,
    *,
    pods: Iterable[Mapping[str, Any]],
    workloads: Iterable[Mapping[str, Any]],
) -> JointDeployment:
    """The deployment as the verdict reads it, from its Pods and the namespace's Workloads."""
    scaling = resolve_scaling(md)
    counts = tuple((r.name, scaling.roles[r.name].count) for r in md.spec.roles)
    return JointDeployment(
        name=md.metadata.name,
        roles=counts,
        sets=admission_sets(counts, scaling.targets),
        pods=[observe_pod(p, owner_uid=md.metadata.uid) for p in pods],
        workloads=[observe_workload(w) for w in workloads],
        replacing=remembered_replacing(md),
        deleting=md.metadata.deletion_timestamp is not None,
    )


def active_condition_apply(*, previous_since: str | None, now: datetime) -> dict[str, Any]:
    """The AdmissionCheck status apply body: ``Active=True``, reason ``Ready``."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": CHECK_NAME},
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": ConditionStatus.TRUE,
                    "reason": "Ready",
                    "message": f"the {CONTROLLER_NAME} controller is running",
                    "lastTransitionTime": previous_since or rfc3339(now),
                }
            ]
        },
    }
