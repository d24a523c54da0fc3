"""The passes to completion: the real rollout planner run on the observed Pods and Workloads, then
on the state each pass leaves behind (docs/explain.md, "Observed state").

Each pass calls :func:`gpustack_render.reconcile.rollout.plan` exactly as the controller does
(the LocalQueues found feeding another ClusterQueue among its inputs) and applies its
:class:`~gpustack_render.reconcile.rollout.RolloutStep` to the observation: deleted Pods and
Workloads vanish (a deletion completes before the next pass), Pods that were already terminating
and Workloads already being deleted are gone after the first pass, and each created seat appears
as whole member Pods with the desired pod-spec-hash, an admitted Workload named after its group,
and Ready. After the first pass every replica that already matches its seat is assumed admitted
and Ready too (the queued replacement gets its quota). Nothing else changes by itself: a Pod this
deployment does not own keeps its group name for ever, an outdated replica that is not admitted
stays so, and a LocalQueue feeding another ClusterQueue keeps its role's seats blocked.

The minimum serving replicas of a role during a pass is counted after the pass's deletions and
before its creations become Ready: a role never gets both in one pass, so that is its low point.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from gpustack_render.core.ownerrefs import OwnedConflict
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex
from gpustack_render.reconcile.rollout import (
    Desired,
    DesiredRole,
    RoleStep,
    RolloutStep,
    Tier,
    is_pod_outdated,
    plan,
)
from gpustack_render.rendering.renderer import Rendering

#: Why a pass deletes a replica's Pods: the planner's tiers (``broken``, ``queued``,
#: ``healthy``, ``orphan``, ``outdated``: a remembered replacement rebuilt) and the other causes.
ROLE_REMOVED = "role-removed"
SCALE_DOWN = "scale-down"
SURPLUS = "surplus"
#: The deletions that replace a replica (counted by ``replaced``); the rolling ones among them.
REPLACING_TIERS = frozenset({Tier.BROKEN, Tier.QUEUED, Tier.HEALTHY, Tier.ORPHAN, Tier.OUTDATED})
ROLLING_TIERS = frozenset({Tier.QUEUED, Tier.HEALTHY, Tier.OUTDATED})

#: What a role waits on (``Wait.on``).
WAIT_ADMISSION = "admission"
WAIT_ADMISSION_GATE = "admission-gate"
WAIT_GROUP_NAME = "group-name"
WAIT_CACHE = "cache"
WAIT_LOCAL_QUEUE = "local-queue"
WAIT_KINDS = (WAIT_ADMISSION, WAIT_ADMISSION_GATE, WAIT_GROUP_NAME, WAIT_CACHE, WAIT_LOCAL_QUEUE)

#: The uid prefix of the Pods and Workloads a simulated pass creates.
_SIMULATED = "explain-simulated"


@dataclass(frozen=True, slots=True)
class RoleCount:
    """Serving replicas of one role (complete, every member live and Ready) of ``desired``."""

    role: str
    serving: int
    desired: int


@dataclass(frozen=True, slots=True)
class Deletion:
    """The Pods of one replica a pass deletes (``ordinal`` is ``None`` for orphans)."""

    role: str
    ordinal: int | None
    why: str
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Creation:
    """A whole replica a pass creates: its member Pods' names (a size-1 Pod is named by the API
    server and shows as its ``generateName`` followed by ``*``)."""

    role: str
    ordinal: int
    pods: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Wait:
    """What holds a role in a pass (``on`` is one of :data:`WAIT_KINDS`)."""

    role: str
    ordinal: int | None
    on: str
    message: str


@dataclass(frozen=True, slots=True)
class Step:
    """One reconcile pass: what it deletes, creates and waits on, the replacement each role
    remembers after it, and the minimum serving replicas per role while it is applied."""

    number: int
    deletes: tuple[Deletion, ...] = ()
    delete_workloads: tuple[str, ...] = ()
    creates: tuple[Creation, ...] = ()
    waits: tuple[Wait, ...] = ()
    replacing: Mapping[str, int | None] | None = None
    min_serving: tuple[RoleCount, ...] = ()

    @property
    def idle(self) -> bool:
        """The pass writes nothing."""
        return not (self.deletes or self.delete_workloads or self.creates)


@dataclass(frozen=True, slots=True)
class Timeline:
    """The passes until the planner has nothing left to do (``converged``), or why it stops
    (``stuck``: a state no pass changes, or the pass bound)."""

    steps: tuple[Step, ...]
    converged: bool
    stuck: str = ""
    #: Distinct replicas (role, ordinal; each orphan deletion once) the passes replace.
    replaced: int = 0
    #: Of those, the ones replaced because they were outdated (they roll).
    rolled: int = 0
    #: The planner's own answer for the first pass (the next one the controller makes).
    first: RolloutStep | None = None


def serving_counts(
    desired: Desired, index: ReplicaIndex, *, gone: frozenset[str] = frozenset()
) -> tuple[RoleCount, ...]:
    """Serving replicas per role, leaving out the Pods whose uid is in ``gone``."""
    out = []
    for role in desired.roles:
        serving = 0
        for replica in index.replicas_of(role.name, role.replicas):
            if replica.without(gone).serving(role.size):
                serving += 1
        out.append(RoleCount(role.name, serving, role.replicas))
    return tuple(out)


def simulate(
    desired: Desired,
    rendering: Rendering,
    *,
    pods: Sequence[ObservedPod],
    workloads: Sequence[ObservedWorkload],
    replacing: Mapping[str, int | None],
    cache_hold: bool,
    max_passes: int,
    queue_conflicts: Mapping[str, OwnedConflict] | None = None,
) -> Timeline:
    """Run passes from the observation until none has anything to do, the state stops changing,
    or ``max_passes`` passes ran. ``queue_conflicts`` are the LocalQueues found feeding another
    ClusterQueue, by name: the planner creates no Pod of a role using one, and nothing the
    passes do changes them."""
    conflicts = queue_conflicts or {}
    state_pods = list(pods)
    state_workloads = list(workloads)
    remembered = dict(replacing)
    steps: list[Step] = []
    replaced: set[tuple[str, int | str]] = set()
    rolled: set[tuple[str, int | str]] = set()
    first: RolloutStep | None = None
    for number in range(1, max_passes + 1):
        index = ReplicaIndex.of(state_pods, state_workloads)
        result = plan(
            desired=desired,
            index=index,
            replacing=remembered,
            cache_hold=cache_hold,
            blocked_queues=conflicts.keys(),
        )
        first = first or result
        step = _step(number, desired, rendering, index, result, conflicts)
        steps.append(step)
        for deletion in step.deletes:
            if deletion.why in REPLACING_TIERS:
                key = (deletion.role, deletion.ordinal if deletion.ordinal is not None else number)
                replaced.add(key)
                if deletion.why in ROLLING_TIERS:
                    rolled.add(key)
        before = (len(state_pods), len(state_workloads), dict(remembered))
        state_pods, state_workloads = _apply(
            result, rendering, state_pods, state_workloads, number=number
        )
        if number == 1:
            state_pods, state_workloads = _assume_admitted(desired, state_pods, state_workloads)
        remembered = dict(result.replacing)
        if step.idle and not result.requeue and not result.blocked:
            return Timeline(tuple(steps), True, "", len(replaced), len(rolled), first)
        after = (len(state_pods), len(state_workloads), remembered)
        if step.idle and number > 1 and before == after:
            return Timeline(tuple(steps), False, _stuck(step), len(replaced), len(rolled), first)
    return Timeline(
        tuple(steps),
        False,
        f"the planner still had work after {max_passes} passes",
        len(replaced),
        len(rolled),
        first,
    )


def _stuck(step: Step) -> str:
    said = "; ".join(f"{w.role}: {w.message}" for w in step.waits)
    return "no pass changes anything any more" + (f": {said}" if said else "")


def _why(pod: ObservedPod, desired: Desired, result: RolloutStep) -> str:
    role = desired.role(pod.role or "")
    step = result.role(pod.role or "")
    if role is None or step is None:
        return ROLE_REMOVED
    if pod.ordinal is not None and pod.ordinal >= role.replicas:
        return SCALE_DOWN
    if step.shed:
        return SURPLUS
    if pod.ordinal is None:
        return Tier.ORPHAN
    return step.tier or Tier.BROKEN


def _step(
    number: int,
    desired: Desired,
    rendering: Rendering,
    index: ReplicaIndex,
    result: RolloutStep,
    queue_conflicts: Mapping[str, OwnedConflict],
) -> Step:
    grouped: dict[tuple[str, int | None, str], list[str]] = {}
    for pod in result.delete_pods:
        key = (pod.role or "", pod.ordinal, _why(pod, desired, result))
        grouped.setdefault(key, []).append(pod.name)
    deletes = tuple(Deletion(r, o, why, tuple(names)) for (r, o, why), names in grouped.items())
    creates = []
    for seat in result.create:
        rendered = rendering.role(seat.role)
        members = rendered.instance(seat.ordinal) if rendered is not None else ()
        creates.append(
            Creation(
                seat.role,
                seat.ordinal,
                tuple(s.name or f"{s.generate_name}*" for s in members),
            )
        )
    waits: list[Wait] = []
    for role in desired.roles:
        step = result.role(role.name)
        if step is not None:
            waits.extend(_waits(role, step, index, result))
        waits.extend(_blocked(role, result, queue_conflicts))
    gone = frozenset(p.uid for p in result.delete_pods)
    return Step(
        number=number,
        deletes=deletes,
        delete_workloads=result.delete_workloads,
        creates=tuple(creates),
        waits=tuple(waits),
        replacing=dict(result.replacing),
        min_serving=serving_counts(desired, index, gone=gone),
    )


def _waits(
    role: DesiredRole, step: RoleStep, index: ReplicaIndex, result: RolloutStep
) -> list[Wait]:
    out: list[Wait] = []
    name = role.name
    if step.held_by_cache:
        out.append(
            Wait(
                name,
                None,
                WAIT_CACHE,
                f"{step.outdated} outdated replica(s) held: the deployment resolved a KV cache "
                "connection before and resolves none now (RolloutHeldByCache)",
            )
        )
    if step.held_by_admission:
        missing = [o for o in range(role.replicas) if not _admitted(index.replica(name, o))]
        out.append(
            Wait(
                name,
                None,
                WAIT_ADMISSION_GATE,
                "the next healthy outdated replica waits until every replica holds an admitted "
                f"Workload; replica(s) {_ordinals(missing)} do not",
            )
        )
    r = step.replacing
    created = {s.ordinal for s in result.create if s.role == name}
    if r is not None and step.replaced is None and r not in created:
        replacement = index.replica(name, r)
        if replacement is not None and not replacement.admitted:
            wls = ", ".join(w.name for w in replacement.workloads) or "none yet"
            out.append(
                Wait(
                    name,
                    r,
                    WAIT_ADMISSION,
                    f"replacement {r} waits for Kueue to admit its Workload ({wls}); the next "
                    "replica is deleted only then",
                )
            )
    for ordinal in step.waiting_ordinals:
        group = role.groups[ordinal] if ordinal < len(role.groups) else ""
        holders = [p.name for p in index.pods if p.group == group]
        held_by = f"Pod(s) {', '.join(holders)}" if holders else f"Workload {group}"
        out.append(
            Wait(
                name,
                ordinal,
                WAIT_GROUP_NAME,
                f"replica {ordinal} is created once nothing holds its group name {group} "
                f"({held_by} still do)",
            )
        )
    return out


def _blocked(
    role: DesiredRole, result: RolloutStep, queue_conflicts: Mapping[str, OwnedConflict]
) -> list[Wait]:
    """The role's seats the planner left out because its LocalQueue feeds another
    ClusterQueue."""
    ordinals = [s.ordinal for s in result.blocked if s.role == role.name]
    if not ordinals:
        return []
    said = queue_conflicts[role.queue].message
    return [
        Wait(
            role.name,
            None,
            WAIT_LOCAL_QUEUE,
            f"replica(s) {_ordinals(ordinals)} are not created: {said}",
        )
    ]


def _admitted(replica: Replica | None) -> bool:
    return replica is not None and replica.admitted


def _ordinals(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values)


def _apply(
    result: RolloutStep,
    rendering: Rendering,
    pods: list[ObservedPod],
    workloads: list[ObservedWorkload],
    *,
    number: int,
) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    """The observation after ``result`` is applied and its deletions have completed."""
    gone = {p.uid for p in result.delete_pods}
    gone_workloads = set(result.delete_workloads)
    kept = [p for p in pods if p.uid not in gone and not p.terminating]
    kept_workloads = [w for w in workloads if w.name not in gone_workloads and not w.deleting]
    for seat in result.create:
        role = rendering.role(seat.role)
        if role is None:
            continue
        members = []
        for s in role.instance(seat.ordinal):
            members.append(
                ObservedPod(
                    name=s.name or f"{s.generate_name}*",
                    uid=f"{_SIMULATED}/{number}/{s.role}/{s.ordinal}/{s.member}",
                    role=s.role,
                    ordinal=s.ordinal,
                    member=s.member,
                    group=s.group_name,
                    pod_spec_hash=s.pod_spec_hash,
                    render_version=s.render_version,
                    group_total=role.size,
                    phase="Running",
                    ready=True,
                    takeover=not role.managed,
                )
            )
        kept.extend(members)
        kept_workloads.append(_admitted_workload(members[0].group or "", members, role.queue))
    return kept, kept_workloads


def _admitted_workload(name: str, pods: Sequence[ObservedPod], queue: str) -> ObservedWorkload:
    return ObservedWorkload(
        name=name,
        owner_pods=frozenset(p.uid for p in pods),
        quota_reserved=True,
        admitted=True,
        ever_admitted=True,
        queue=queue,
        uid=f"{_SIMULATED}/{name}",
    )


def _assume_admitted(
    desired: Desired, pods: list[ObservedPod], workloads: list[ObservedWorkload]
) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
    """Every live owned replica that matches its seats is admitted and Ready from now on (a
    Failed member stays Failed: the planner rebuilds that replica)."""
    index = ReplicaIndex.of(pods, workloads)
    healed: dict[str, ObservedPod] = {}
    admit: set[str] = set()
    new_workloads: list[ObservedWorkload] = []
    for role in desired.roles:
        for replica in index.replicas_of(role.name, role.replicas):
            live = replica.pods
            if any(is_pod_outdated(p, role, floor=desired.floor) for p in live):
                continue
            for p in live:
                if not p.failed and (not p.ready or p.scheduling_gates or p.gated):
                    healed[p.uid] = replace(
                        p,
                        phase="Running",
                        ready=True,
                        gated=False,
                        scheduling_gates=(),
                        unscheduled_reason="",
                        unscheduled_message="",
                        waiting_reasons=(),
                    )
            admit.update(w.name for w in replica.workloads)
            if not replica.workloads:
                new_workloads.append(_admitted_workload(role.groups[replica.ordinal], live, ""))
    if (
        not healed
        and not new_workloads
        and all(w.admitted and w.active for w in workloads if w.name in admit)
    ):
        return pods, workloads
    out_pods = [healed.get(p.uid, p) for p in pods]
    out_workloads = [
        replace(
            w,
            quota_reserved=True,
            admitted=True,
            ever_admitted=True,
            evicted=False,
            active=True,
        )
        if w.name in admit and not (w.admitted and w.active)
        else w
        for w in workloads
    ]
    return out_pods, [*out_workloads, *new_workloads]
