"""The rollout planner: (desired seats, observed Pods and Workloads, remembered replacement,
blocked LocalQueues) → the next step of one reconcile pass.

This is the pure core of the controller's converge (docs/contract/controller.md §4 steps
5–8, §5, §6, §7, §8, §10; the seed's "Rollout behavior" and "Replica departures"; D4, D6, D25).
The controller fetches, calls :func:`plan`, and applies the returned :class:`RolloutStep` in this
order:

1. when :attr:`RolloutStep.persist_first` is set, write ``status.roles[].replacing`` (the values
   in :attr:`RolloutStep.replacing`) **before** deleting anything, so a restart resumes the same
   replica;
2. delete :attr:`RolloutStep.delete_pods` (default grace), then
   :attr:`RolloutStep.delete_workloads` (NotFound is success);
3. create every member Pod of each seat in :attr:`RolloutStep.create`;
4. requeue after 2 s when :attr:`RolloutStep.requeue` is set.

Rules in one place:

- **Classification** per role: a live owned Pod with no ordinal is an *orphan*; an ordinal ≥
  ``replicas`` is *removed*; otherwise it *occupies* its ordinal. The replicas are read from the
  :class:`~gpustack_render.reconcile.replicas.ReplicaIndex`, never regrouped here.
- **Scale-down** deletes removed Pods, highest ordinal first, then their Workloads; survivors
  are never touched. It never leaves a role with no serving replica while it has one: when no
  replica below the new count serves (a rollout replacing it, a preempted one queued), the
  lowest serving removed replica (its whole unit, for a ratio group) stays until one does
  (D27, docs/autoscaling.md). **Surplus** sheds orphans and duplicate seat occupants.
- **Rollout** replaces one replica per role at a time (D6), choosing tier a (broken), then b
  (queued, never admitted), then c (healthy; only when every declared replica holds an
  admitted Workload). ``replacing`` is remembered until the replacement is admitted.
- **Create gate**: an unoccupied ordinal is created once no Pod on the API server carries its
  group name; a never-used ordinal has nothing to wait out, so scale-up is immediate.
- **Blocked queues** (§10): no Pod of a role whose LocalQueue feeds another ClusterQueue is
  created; the seats the create gate would have created are reported in
  :attr:`RolloutStep.blocked` instead.
- A role never gets both a create and a delete in one pass.
- **Elastic EP** (docs/contract/elastic-ep.md §3.8, D29): a role marked ``elastic`` is never
  rolled, scaled down or shed. Its terminal members (Failed or Succeeded, not being deleted)
  are deleted with their Workloads; otherwise its missing ordinals below the width are created
  by the create gate. Nothing else deletes a member: only the width-change machine may (and this
  release never shrinks). The Ray head's Pods (``Desired.companions``: a component that is no
  role) are neither created nor deleted here; the controller's elastic step keeps the head.

A replica is never reshaped: the create gate creates whole seats only, so no ordinal ever holds
members of two configurations (the seed's "mixed configurations across instances, never within
one"). A replica on a NotReady node keeps its Running phase and is left alone: nothing here reads
node health.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import Replica, ReplicaIndex


@dataclass(frozen=True, slots=True)
class DesiredRole:
    """What one role should run: ``replicas`` seats of ``size`` members each.

    ``hashes`` maps (ordinal, member) → the seat's pod-spec-hash; ``groups`` holds the Kueue
    group name of each ordinal (index = ordinal); ``queue`` is the LocalQueue its Pods name
    (``""``: none known). All come from the rendering.
    """

    name: str
    replicas: int
    size: int
    hashes: Mapping[tuple[int, int], str]
    groups: Sequence[str]
    queue: str = ""
    #: The ratio group scaling the role and its replicas per unit (D27): a scale-down that
    #: keeps a replica back keeps its whole unit.
    unit_group: str | None = None
    per_unit: int = 1
    #: An Elastic EP role (``replicas`` is its width): no rollout, no scale-down, no surplus
    #: deletion; terminal members are replaced (§3.8).
    elastic: bool = False

    def seat_hash(self, ordinal: int, member: int) -> str | None:
        """The seat's pod-spec-hash; ``None`` for a seat the current spec does not have."""
        return self.hashes.get((ordinal, member))


@dataclass(frozen=True, slots=True)
class Desired:
    """The rendered deployment as the planner needs it: roles in spec order and the floor."""

    roles: tuple[DesiredRole, ...]
    #: The effective render-version floor (hashing.effective_floor).
    floor: int = 1
    #: The renderer's current baseline (hashing.CURRENT_RENDER_VERSION).
    render_version: int = 1
    #: Components of the deployment's Pods that are no role and that the planner leaves alone
    #: (an Elastic EP role's Ray head, ``<md>-elastic-head``): never "a role no longer in the
    #: spec".
    companions: frozenset[str] = frozenset()

    def role(self, name: str) -> DesiredRole | None:
        """The role named ``name``, if the spec declares it."""
        for role in self.roles:
            if role.name == name:
                return role
        return None

    @property
    def groups(self) -> frozenset[str]:
        """The Kueue group (Workload) name of every declared replica of every role."""
        return frozenset(g for r in self.roles for g in r.groups)


@dataclass(frozen=True, slots=True)
class Seat:
    """One replica to create: every member Pod of ``role``'s ``ordinal``."""

    role: str
    ordinal: int


class Tier:
    """Why a replica is being replaced (docs/contract/controller.md §6)."""

    BROKEN = "broken"
    QUEUED = "queued"
    HEALTHY = "healthy"
    ORPHAN = "orphan"
    OUTDATED = "outdated"  # the remembered replacement itself went outdated or broke


@dataclass(frozen=True, slots=True)
class RoleStep:
    """What the planner decided for one role, for status and logs."""

    role: str
    #: ``status.roles[].replacing`` after this pass.
    replacing: int | None
    #: Live replicas (ordinals < replicas) whose Pods are outdated (hash or floor).
    outdated: int = 0
    #: Live replicas running an older but compatible render-version (kept, D4).
    compatible_older: int = 0
    #: Deleted nothing because a cache connection did not resolve (``RolloutHeldByCache``).
    held_by_cache: bool = False
    #: A healthy outdated replica waits for every replica to hold an admitted Workload.
    held_by_admission: bool = False
    #: Pods were shed for surplus; no rollout this pass.
    shed: bool = False
    #: The replica chosen for replacement this pass and why (``None`` when none).
    replaced: int | None = None
    tier: str | None = None
    #: Ordinals the create gate skipped because a Pod of their group still stands.
    waiting_ordinals: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class RolloutStep:
    """The planner's answer for one pass: the actions, in the order the controller applies
    them, and what each role decided."""

    #: role → ordinal being replaced after this pass (``None`` = absent), for every role.
    replacing: Mapping[str, int | None]
    #: Write ``replacing`` before the deletions (a new replacement was chosen, D6 [inferred]).
    persist_first: bool
    delete_pods: tuple[ObservedPod, ...]
    delete_workloads: tuple[str, ...]
    create: tuple[Seat, ...]
    requeue: bool
    roles: tuple[RoleStep, ...] = ()
    #: Seats the create gate would have created, left out of ``create`` because their role's
    #: LocalQueue feeds another ClusterQueue (§10). They do not set ``requeue``: the controller
    #: looks at a conflicting LocalQueue again on its own, slower cadence.
    blocked: tuple[Seat, ...] = ()

    def role(self, name: str) -> RoleStep | None:
        for step in self.roles:
            if step.role == name:
                return step
        return None


def is_pod_outdated(pod: ObservedPod, role: DesiredRole, *, floor: int) -> bool:
    """Outdated against **its own seat's** render (docs/contract/controller.md §6,
    docs/contract/render.md §7, D4)."""
    if pod.ordinal is None:
        return True
    seat = role.seat_hash(pod.ordinal, pod.member)
    return seat is None or pod.pod_spec_hash != seat or pod.render_version < floor


class _Actions:
    """Ordered, de-duplicated deletions and creations of one pass."""

    def __init__(self, index: ReplicaIndex, standing: Sequence[ObservedPod]) -> None:
        self._index = index
        self._standing = standing
        self.pods: dict[str, ObservedPod] = {}
        self.workloads: dict[str, None] = {}
        self.create: list[Seat] = []
        self.blocked: list[Seat] = []

    def delete(self, pods: Iterable[ObservedPod]) -> None:
        """Delete ``pods``, then every Workload owning them that owns no other standing Pod."""
        batch = [p for p in pods if p.uid not in self.pods]
        for pod in batch:
            self.pods[pod.uid] = pod
        leaving = set(self.pods)
        staying = {p.uid for p in self._standing if p.uid not in leaving}
        for wl in self._index.workloads_of(batch):
            # A Workload shared with a Pod that stays (a duplicate seat's sibling) is kept:
            # deleting it would take the staying replica's admission with it.
            if not wl.owns_any(staying):
                self.workloads.setdefault(wl.name, None)

    def delete_workloads(self, names: Iterable[str]) -> None:
        for name in names:
            self.workloads.setdefault(name, None)


def _ordinal_key(pod: ObservedPod) -> tuple[int, str]:
    return (pod.ordinal if pod.ordinal is not None else -1, pod.name)


def _desc(pods: Iterable[ObservedPod]) -> list[ObservedPod]:
    """Highest ordinal first, then descending name; orphans last."""
    return sorted(pods, key=_ordinal_key, reverse=True)


def plan(
    *,
    desired: Desired,
    pods: Sequence[ObservedPod] = (),
    workloads: Sequence[ObservedWorkload] = (),
    index: ReplicaIndex | None = None,
    replacing: Mapping[str, int | None],
    cache_hold: bool = False,
    blocked_queues: Collection[str] = frozenset(),
) -> RolloutStep:
    """The next step of a reconcile pass.

    ``pods`` are every Pod carrying the deployment's selector labels as the API server holds
    them at the start of the pass (an uncached list): owned and not owned, terminating or not.
    ``workloads`` are the Workloads of the namespace (only those owning one of ``pods`` matter).
    ``replacing`` is ``status.roles[].replacing`` by role (D6). ``cache_hold`` is true when the
    deployment has resolved a cache connection before (``status.kvCache`` set) but none resolved
    this pass: outdated roles then delete nothing (``RolloutHeldByCache``). ``blocked_queues``
    are the LocalQueues found feeding another ClusterQueue (``reconcile/queues.py``): no seat of
    a role whose queue is one of them is created (:attr:`RolloutStep.blocked`).
    """
    if index is None:
        index = ReplicaIndex.of(pods, workloads)
    elif pods or workloads:
        raise ValueError("plan: pass the observed Pods and Workloads or their index, not both")
    standing = list(index.live)
    actions = _Actions(index, standing)
    requeue = False

    # Pods of a role no longer in the spec (docs/contract/controller.md §4.5).
    names = {r.name for r in desired.roles}
    gone = [p for p in standing if p.role not in names and p.role not in desired.companions]
    if gone:
        actions.delete(_desc(gone))
        requeue = True

    # Stranded Workloads (§4.6): a Pod already terminating at pass start (a drain, a kubelet
    # eviction, `kubectl delete pod`) is held by Kueue's finalizer while its Workload stands.
    standing_uids = {p.uid for p in standing}
    terminating = index.terminating
    stranded = [wl.name for wl in index.workloads_of(terminating) if not wl.owns_any(standing_uids)]
    # A Workload named after a declared group that owns no standing Pod and is not being
    # deleted is left over (its Pods are gone): delete it, or it holds the ordinal for ever.
    declared = desired.groups
    stranded += [
        wl.name
        for wl in index.workloads
        if wl.name in declared and not wl.deleting and not wl.owns_any(standing_uids)
    ]
    if stranded:
        actions.delete_workloads(stranded)
    if terminating:
        requeue = True

    retained = _retained(desired, index)

    # Any Pod on the API server holding a group name, and any Workload of that name (Kueue
    # names a group's Workload after it, keeps a deleted one until the group has stopped and
    # attaches new Pods of the name to it), blocks recreating that ordinal (§5).
    held_groups = {p.group for p in index.pods if p.group} | {w.name for w in index.workloads}

    steps: list[RoleStep] = []
    new_replacing: dict[str, int | None] = {}
    persist_first = False
    for role in desired.roles:
        remembered = replacing.get(role.name)
        if role.elastic:
            step, role_requeue = _plan_elastic_role(
                role,
                actions=actions,
                index=index,
                held_groups=held_groups,
                floor=desired.floor,
                blocked=bool(role.queue) and role.queue in blocked_queues,
            )
            steps.append(step)
            new_replacing[role.name] = None
            requeue = requeue or role_requeue
            continue
        step, role_requeue = _plan_role(
            role,
            actions=actions,
            index=index,
            held_groups=held_groups,
            remembered=remembered,
            floor=desired.floor,
            current=desired.render_version,
            cache_hold=cache_hold,
            blocked=bool(role.queue) and role.queue in blocked_queues,
            retained=retained.get(role.name, frozenset()),
        )
        steps.append(step)
        new_replacing[role.name] = step.replacing
        if step.replacing is not None and step.replacing != remembered:
            persist_first = True
        requeue = requeue or role_requeue
    return RolloutStep(
        replacing=new_replacing,
        persist_first=persist_first,
        delete_pods=tuple(actions.pods.values()),
        delete_workloads=tuple(actions.workloads),
        create=tuple(actions.create),
        requeue=requeue,
        roles=tuple(steps),
        blocked=tuple(actions.blocked),
    )


def acts(step: RolloutStep) -> bool:
    """Whether a plan writes or waits on what it saw: it creates or deletes, remembers a new
    replacement, holds (requeues) or leaves seats blocked. Such a plan is made on Pods listed
    live (the create gate's uncached list, docs/contract/controller.md §6); one that does none of
    these only reports, and the caches are good enough for that."""
    return bool(
        step.create
        or step.delete_pods
        or step.delete_workloads
        or step.persist_first
        or step.requeue
        or step.blocked
    )


def requeue_after(step: RolloutStep, after: ReplicaIndex) -> bool:
    """Whether the pass looks again shortly: the plan holds something, or an owned Pod is
    still terminating once the pass's writes are done."""
    return step.requeue or bool(after.terminating)


def _plan_role(  # noqa: C901 (one ordered decision over a role's seats (resume, choose, hold); its branches share the pass's state)
    role: DesiredRole,
    *,
    actions: _Actions,
    index: ReplicaIndex,
    held_groups: set[str],
    remembered: int | None,
    floor: int,
    current: int,
    cache_hold: bool,
    blocked: bool,
    retained: frozenset[int] = frozenset(),
) -> tuple[RoleStep, bool]:
    """Scale-down and surplus, then rollout, then the create gate, for one role."""
    orphans = index.orphans_of(role.name)
    removed = [p for p in index.beyond(role.name, role.replicas) if p.ordinal not in retained]
    occupied = {r.ordinal: r for r in index.replicas_of(role.name, role.replicas)}

    deleted = False
    requeue = bool(retained)  # a kept-back replica leaves once a kept ordinal serves

    # Scale-down (§5): highest ordinals first, with their Workloads; survivors untouched.
    if removed:
        actions.delete(_desc(removed))
        deleted = True

    # Surplus (§5): orphans and duplicate seat occupants beyond replicas × size.
    orphans, occupied, shed = _shed_surplus(role, orphans, occupied, actions=actions)
    if shed:
        deleted = requeue = True

    outdated = sorted(
        o for o, r in occupied.items() if any(is_pod_outdated(p, role, floor=floor) for p in r.pods)
    )
    compatible_older = sum(
        1
        for o, r in occupied.items()
        if o not in outdated and any(p.render_version < current for p in r.pods)
    )

    # Rollout (§6).
    replacing = remembered
    if replacing is not None and replacing >= role.replicas:
        replacing = None
    replaced: int | None = None
    tier: str | None = None
    held_by_cache = False
    held_by_admission = False
    if not shed:
        hold = cache_hold and bool(outdated)
        held_by_cache = hold
        if replacing is not None:
            slot = occupied.get(replacing)
            if slot is not None:
                stale = any(is_pod_outdated(p, role, floor=floor) for p in slot.pods)
                if not slot.broken(role.size) and slot.admitted:
                    # Resolved: the replacement holds its fresh admission. Should a newer edit
                    # have outdated it meanwhile, it is now an ordinary running replica and
                    # waits for the admission gate like any other (per seed: only a
                    # replacement still waiting is superseded without the gate).
                    replacing = None
                elif stale or slot.broken(role.size):
                    if hold:
                        requeue = True
                    else:
                        # An interrupted deletion, a superseded queued replacement, or a
                        # replacement that lost a member: rebuilt whole from the current render.
                        actions.delete(_desc(slot.pods))
                        deleted = True
                        requeue = True
                        replaced, tier = replacing, Tier.OUTDATED if stale else Tier.BROKEN
                else:
                    requeue = True  # the replacement waits for its fresh admission
            else:
                requeue = True  # the create gate below recreates it
                if orphans and not hold:
                    # Orphans would otherwise take the slot's count and starve the replacement.
                    actions.delete(_desc(orphans))
                    deleted = True
        if replacing is None and not deleted and not hold:
            choice = _choose(role, occupied, orphans, floor=floor)
            if choice is not None:
                ordinal, chosen_tier, victims = choice
                if chosen_tier == Tier.HEALTHY and not _gate_open(role, occupied):
                    held_by_admission = True
                    requeue = True
                else:
                    actions.delete(victims)
                    deleted = True
                    requeue = True
                    tier = chosen_tier
                    if ordinal is not None:
                        replacing = replaced = ordinal
        elif hold:
            requeue = True

    # Create gate (§5): never in a pass that deleted in this role.
    waiting: list[int] = []
    if not deleted:
        waiting = _create_missing(
            role, occupied, orphans, actions=actions, held_groups=held_groups, blocked=blocked
        )
        requeue = requeue or bool(waiting)

    requeue = requeue or deleted  # a deletion is in flight
    step = RoleStep(
        role=role.name,
        replacing=replacing,
        outdated=len(outdated),
        compatible_older=compatible_older,
        held_by_cache=held_by_cache,
        held_by_admission=held_by_admission,
        shed=shed,
        replaced=replaced,
        tier=tier,
        waiting_ordinals=tuple(waiting),
    )
    return step, requeue


def _plan_elastic_role(
    role: DesiredRole,
    *,
    actions: _Actions,
    index: ReplicaIndex,
    held_groups: set[str],
    floor: int,
    blocked: bool,
) -> tuple[RoleStep, bool]:
    """An Elastic EP role (docs/contract/elastic-ep.md §3.8): delete its terminal members with
    their Workloads, else create its missing ordinals below the width; never a rollout, a
    scale-down or a surplus deletion. Outdated members are counted for status, and stay."""
    terminal = [
        p
        for p in index.live_of(role.name)
        if p.phase in ("Failed", "Succeeded") and p.ordinal is not None
    ]
    occupied = {
        r.ordinal: r
        for r in index.replicas_of(role.name, role.replicas)
        if not any(p.phase in ("Failed", "Succeeded") for p in r.pods)
    }
    outdated = sum(
        1 for r in occupied.values() if any(is_pod_outdated(p, role, floor=floor) for p in r.pods)
    )
    waiting: list[int] = []
    if terminal:
        actions.delete(_desc(terminal))
    else:
        # Terminal members' groups are held until their Pods are gone: the gate waits them out.
        waiting = _create_missing(
            role, occupied, (), actions=actions, held_groups=held_groups, blocked=blocked
        )
    step = RoleStep(
        role=role.name, replacing=None, outdated=outdated, waiting_ordinals=tuple(waiting)
    )
    return step, bool(terminal) or bool(waiting)


def _retained(desired: Desired, index: ReplicaIndex) -> dict[str, frozenset[int]]:
    """Replicas above the new count a scale-down keeps this pass, by role: a role with a count
    of at least one, no serving replica below it and a serving one above keeps the lowest
    serving one above (for a ratio group, the whole unit holding it, in every role of the
    group, so units leave whole). Nothing is kept for a scale to zero."""
    wanted: dict[str, int] = {}
    for role in desired.roles:
        if role.replicas < 1:
            continue
        if any(r.serving(role.size) for r in index.replicas_of(role.name, role.replicas)):
            continue
        above = sorted(
            {p.ordinal for p in index.beyond(role.name, role.replicas) if p.ordinal is not None}
        )
        serving = [o for o in above if (r := index.replica(role.name, o)) and r.serving(role.size)]
        if serving:
            wanted[role.name] = serving[0]
    out: dict[str, frozenset[int]] = {}
    groups: dict[str, int] = {}
    for role in desired.roles:
        if role.name not in wanted:
            continue
        if role.unit_group is None:
            out[role.name] = frozenset({wanted[role.name]})
        else:
            unit = wanted[role.name] // role.per_unit
            groups[role.unit_group] = max(groups.get(role.unit_group, unit), unit)
    for role in desired.roles:
        if role.unit_group in groups:
            unit = groups[role.unit_group]
            out[role.name] = frozenset(range(unit * role.per_unit, (unit + 1) * role.per_unit))
    return out


def _shed_surplus(
    role: DesiredRole,
    orphans: list[ObservedPod],
    occupied: dict[int, Replica],
    *,
    actions: _Actions,
) -> tuple[list[ObservedPod], dict[int, Replica], bool]:
    """Delete orphans, then duplicate seat occupants, beyond replicas × size; the orphans and
    occupied seats left, and whether anything was shed."""
    kept = len(orphans) + sum(len(r.pods) for r in occupied.values())
    surplus = kept - role.replicas * role.size
    if surplus <= 0:
        return orphans, occupied, False
    victims = (_desc(orphans) + _duplicates(role, occupied))[:surplus]
    if not victims:
        return orphans, occupied, False
    actions.delete(victims)
    victim_uids = {p.uid for p in victims}
    left = {o: r.without(victim_uids) for o, r in occupied.items()}
    return [p for p in orphans if p.uid not in victim_uids], left, True


def _create_missing(
    role: DesiredRole,
    occupied: Mapping[int, Replica],
    orphans: Sequence[ObservedPod],
    *,
    actions: _Actions,
    held_groups: set[str],
    blocked: bool,
) -> list[int]:
    """Schedule whole seats for the lowest free ordinals, as many as are missing; an ordinal
    whose group name a Pod or a Workload still holds waits. A ``blocked`` role (its LocalQueue
    feeds another ClusterQueue) gets its seats reported as blocked instead of created. Returns
    the waiting ordinals."""
    waiting: list[int] = []
    missing = role.replicas - len(occupied) - len(orphans)
    for ordinal in range(role.replicas):
        if missing <= 0:
            break
        if ordinal in occupied:
            continue
        group = role.groups[ordinal] if ordinal < len(role.groups) else None
        if group is not None and group in held_groups:
            waiting.append(ordinal)
            continue
        (actions.blocked if blocked else actions.create).append(Seat(role.name, ordinal))
        missing -= 1
    return waiting


def _duplicates(role: DesiredRole, occupied: Mapping[int, Replica]) -> list[ObservedPod]:
    """Every occupant of a seat beyond its keeper: the one whose pod-spec-hash matches the
    seat (ties: greatest name). Highest ordinal first, then descending name."""
    extra: list[ObservedPod] = []
    for ordinal in sorted(occupied, reverse=True):
        by_member: dict[int, list[ObservedPod]] = {}
        for pod in occupied[ordinal].pods:
            by_member.setdefault(pod.member, []).append(pod)
        seat_extra: list[ObservedPod] = []
        for member, occupants in by_member.items():
            if len(occupants) < 2:
                continue
            seat = role.seat_hash(ordinal, member)
            keeper = max(occupants, key=lambda p: (p.pod_spec_hash == seat, p.name))
            seat_extra.extend(p for p in occupants if p is not keeper)
        extra.extend(sorted(seat_extra, key=lambda p: p.name, reverse=True))
    return extra


def _choose(
    role: DesiredRole,
    occupied: Mapping[int, Replica],
    orphans: Sequence[ObservedPod],
    *,
    floor: int,
) -> tuple[int | None, str, list[ObservedPod]] | None:
    """The replica to replace next: the highest ordinal of the first non-empty tier."""
    broken = [o for o, r in occupied.items() if r.broken(role.size)]
    if broken:
        ordinal = max(broken)
        return ordinal, Tier.BROKEN, _desc(occupied[ordinal].pods)
    if orphans:
        # Orphans rank lowest within tier a and carry no ordinal to remember.
        return None, Tier.ORPHAN, _desc(orphans)
    stale = [
        o for o, r in occupied.items() if any(is_pod_outdated(p, role, floor=floor) for p in r.pods)
    ]
    queued = [
        o for o in stale if all(p.gated for p in occupied[o].pods) and occupied[o].never_admitted
    ]
    if queued:
        ordinal = max(queued)
        return ordinal, Tier.QUEUED, _desc(occupied[ordinal].pods)
    if stale:
        ordinal = max(stale)
        return ordinal, Tier.HEALTHY, _desc(occupied[ordinal].pods)
    return None


def _gate_open(role: DesiredRole, occupied: Mapping[int, Replica]) -> bool:
    """Every replica the role declares holds a Workload with ``Admitted=True`` (per seed)."""
    for ordinal in range(role.replicas):
        replica = occupied.get(ordinal)
        if replica is None or not replica.admitted:
            return False
    return True
