"""The rollout planner on a simulated cluster: a Hypothesis state machine.

The simulation plays the API server (fixed names collide, Kueue's finalizer holds a deleted
member while its Workload stands, garbage collection removes a Workload whose owner Pods are
gone), Kueue (composes one Workload per complete group, admits, preempts by deleting the group's
Pods), the kubelet (evicts a Pod to phase Failed) and users (scale, edits, a size change, a
render-version upgrade and floor, ``kubectl delete pod``, a NotReady node). The controller is
:func:`gpustack_render.reconcile.rollout.plan` applied in the documented order; a controller
restart is a
pass cut short after any number of its deletions, with only ``status.roles[].replacing`` carried
over (D6).

Invariants (issue 8):

* never more than one unresolved replacement per role;
* no ordinal ever holds members of two configurations;
* a current, complete, healthy replica inside ``replicas`` is never deleted (so a ``replicas``
  change never touches a survivor);
* once the perturbations stop and Kueue admits what it is given, the simulation converges to
  exactly the rendered seats with no replacement remembered.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.rollout import Desired, DesiredRole, RolloutStep, plan

ROLES = ("a", "b")


@dataclass
class SimRole:
    replicas: int
    size: int
    config: int = 0


@dataclass
class SimPod:
    uid: str
    name: str
    role: str
    ordinal: int
    member: int
    group: str
    hash: str
    render_version: int
    total: int
    config: tuple[int, int]
    phase: str = "Pending"
    reason: str = ""
    terminating: bool = False
    gated: bool = True
    ready: bool = False
    finalizer: bool = False

    def observed(self) -> ObservedPod:
        return ObservedPod(
            name=self.name,
            uid=self.uid,
            role=self.role,
            ordinal=self.ordinal,
            member=self.member,
            group=self.group,
            pod_spec_hash=self.hash,
            render_version=self.render_version,
            group_total=self.total,
            phase=self.phase,
            reason=self.reason,
            terminating=self.terminating,
            ready=self.ready,
            gated=self.gated,
        )


@dataclass
class SimWorkload:
    name: str
    owners: set[str]
    admitted: bool = False
    ever_admitted: bool = False
    evicted: bool = False
    #: Deleted, and held by Kueue's finalizer until its group has stopped.
    deleting: bool = False

    def observed(self) -> ObservedWorkload:
        return ObservedWorkload(
            name=self.name,
            owner_pods=frozenset(self.owners),
            quota_reserved=self.admitted,
            admitted=self.admitted and not self.evicted and not self.deleting,
            ever_admitted=self.ever_admitted,
            evicted=self.evicted,
            preempted=self.evicted,
            deleting=self.deleting,
        )

    def admissible(self, pods: dict[str, SimPod]) -> bool:
        """Kueue can admit it: not admitted, not deleted, and every owner Pod standing."""
        owners = [pods.get(uid) for uid in self.owners]
        return (
            not self.admitted
            and not self.deleting
            and all(p is not None and not p.terminating for p in owners)
        )


@dataclass
class Cluster:
    roles: dict[str, SimRole]
    render_version: int = 1
    floor: int = 1
    pods: dict[str, SimPod] = field(default_factory=dict)
    workloads: dict[str, SimWorkload] = field(default_factory=dict)
    replacing: dict[str, int | None] = field(default_factory=dict)
    serial: int = 0

    # ---- desired state ------------------------------------------------------------------

    def seat_hash(self, role: str, ordinal: int, member: int) -> str:
        return f"{role}/c{self.roles[role].config}/s{self.roles[role].size}/{ordinal}/{member}"

    def desired(self) -> Desired:
        out = []
        for name, r in self.roles.items():
            hashes = {
                (o, m): self.seat_hash(name, o, m) for o in range(r.replicas) for m in range(r.size)
            }
            groups = [f"g-{name}-{o}" for o in range(r.replicas)]
            out.append(DesiredRole(name, r.replicas, r.size, hashes, groups))
        return Desired(tuple(out), floor=self.floor, render_version=self.render_version)

    # ---- API server ---------------------------------------------------------------------

    def standing(self) -> list[SimPod]:
        return [p for p in self.pods.values() if not p.terminating]

    def create_seat(self, role: str, ordinal: int) -> None:
        r = self.roles[role]
        # Kueue attaches new Pods of a group name to the Workload of that name, deleted or not:
        # a replacement is created only once the Workload it replaces has left.
        group = f"g-{role}-{ordinal}"
        assert group not in self.workloads, f"{group} created while its Workload stands"
        for member in range(r.size):
            self.serial += 1
            if r.size == 1:
                name = f"md-{role}-{self.serial:05d}"
            else:
                name = f"md-{role}-r{ordinal}-m{member}"
            assert all(p.name != name for p in self.pods.values()), f"{name} already exists"
            uid = f"uid-{self.serial}"
            self.pods[uid] = SimPod(
                uid=uid,
                name=name,
                role=role,
                ordinal=ordinal,
                member=member,
                group=f"g-{role}-{ordinal}",
                hash=self.seat_hash(role, ordinal, member),
                render_version=self.render_version,
                total=r.size,
                config=(r.config, r.size),
            )

    def delete_pod(self, uid: str) -> None:
        pod = self.pods.get(uid)
        if pod is None:
            return
        held = pod.finalizer and any(uid in w.owners for w in self.workloads.values())
        if held or pod.phase != "Pending":
            # Kueue's finalizer, or a grace period on a Pod that ran.
            pod.terminating = True
        else:
            del self.pods[uid]

    def delete_workload(self, name: str) -> None:
        """Kueue keeps a deleted Workload (its resource-in-use finalizer) until the group has
        stopped: it deletes the group's Pods and releases them; the Workload goes once none of
        its Pods is left (:meth:`garbage_collect`)."""
        wl = self.workloads.get(name)
        if wl is None:
            return
        wl.deleting = True
        for uid in wl.owners:
            pod = self.pods.get(uid)
            if pod is not None:
                pod.terminating = True
        self.kueue_release()

    def kueue_release(self) -> None:
        """Kueue drops its finalizer from a terminating Pod once no live Workload owns it."""
        owned = {uid for w in self.workloads.values() if not w.deleting for uid in w.owners}
        for pod in self.pods.values():
            if pod.terminating and pod.uid not in owned:
                pod.finalizer = False

    def kubelet_finish(self) -> None:
        """Terminating Pods without a finalizer finish their grace period and go."""
        for uid in [u for u, p in self.pods.items() if p.terminating and not p.finalizer]:
            del self.pods[uid]

    def garbage_collect(self) -> None:
        """The garbage collector deletes a Workload none of whose owner Pods is left; a
        deleted one stays until Kueue drops its finalizer (:meth:`kueue_drop_deleted`)."""
        for name, wl in list(self.workloads.items()):
            if not (wl.owners & set(self.pods)) and not wl.deleting:
                del self.workloads[name]

    def kueue_drop_deleted(self) -> None:
        """Kueue removes its finalizer from a deleted Workload whose group has stopped."""
        for name, wl in list(self.workloads.items()):
            if wl.deleting and not (wl.owners & set(self.pods)):
                del self.workloads[name]

    # ---- Kueue --------------------------------------------------------------------------

    def compose(self) -> None:
        groups: dict[str, list[SimPod]] = {}
        for pod in self.standing():
            groups.setdefault(pod.group, []).append(pod)
        for group, members in groups.items():
            if group in self.workloads or len(members) != members[0].total:
                continue
            self.workloads[group] = SimWorkload(group, {p.uid for p in members})
            for pod in members:
                pod.finalizer = True

    def admit(self, name: str) -> None:
        wl = self.workloads[name]
        wl.admitted = wl.ever_admitted = True
        wl.evicted = False
        for uid in wl.owners:
            pod = self.pods.get(uid)
            if pod is not None and pod.gated:
                pod.gated = False
                pod.phase = "Running"
                pod.ready = True

    def preempt(self, name: str) -> None:
        """Kueue's eviction path: the Workload is evicted and requeued (quota released), the
        group's Pods are deleted but keep Kueue's finalizer, and nothing is released until the
        Workload is deleted (by the controller: a stranded Workload) or replacements join."""
        wl = self.workloads[name]
        wl.admitted = False
        wl.evicted = True
        for uid in wl.owners:
            pod = self.pods.get(uid)
            if pod is not None:
                pod.terminating = True

    def settle(self) -> None:
        self.kueue_release()
        self.garbage_collect()
        self.compose()

    # ---- the controller -----------------------------------------------------------------

    def observe(self) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
        return (
            [p.observed() for p in self.pods.values()],
            [w.observed() for w in self.workloads.values()],
        )

    def plan(self) -> RolloutStep:
        pods, workloads = self.observe()
        return plan(
            desired=self.desired(),
            pods=pods,
            workloads=workloads,
            replacing=dict(self.replacing),
        )

    def apply(self, step: RolloutStep, *, cut_after: int | None = None) -> None:
        if step.persist_first:
            self.replacing = dict(step.replacing)
        for i, pod in enumerate(step.delete_pods):
            if cut_after is not None and i >= cut_after:
                return
            self.delete_pod(pod.uid)
        if cut_after is not None:
            return
        for name in step.delete_workloads:
            self.delete_workload(name)
        for seat in step.create:
            self.create_seat(seat.role, seat.ordinal)
        self.replacing = dict(step.replacing)

    # ---- readings for the invariants ----------------------------------------------------

    def current(self, pod: SimPod) -> bool:
        r = self.roles[pod.role]
        return (
            pod.ordinal < r.replicas
            and pod.member < r.size
            and pod.hash == self.seat_hash(pod.role, pod.ordinal, pod.member)
            and pod.render_version >= self.floor
        )

    def replica(self, role: str, ordinal: int) -> list[SimPod]:
        return [p for p in self.standing() if p.role == role and p.ordinal == ordinal]

    def healthy_current(self, role: str, ordinal: int) -> bool:
        members = self.replica(role, ordinal)
        size = self.roles[role].size
        return sorted(p.member for p in members) == list(range(size)) and all(
            self.current(p) and p.phase != "Failed" for p in members
        )

    def admitted_replica(self, role: str, ordinal: int) -> bool:
        """A complete replica without a failed member holding an admitted Workload: a
        replacement is resolved once it is admitted, whatever edit came after (D6)."""
        members = self.replica(role, ordinal)
        total = members[0].total if members else 0
        if sorted(p.member for p in members) != list(range(total)):
            return False
        if any(p.phase == "Failed" for p in members):
            return False
        uids = {p.uid for p in members}
        return any(w.admitted and w.owners & uids for w in self.workloads.values())


class RolloutMachine(RuleBasedStateMachine):
    """Scale, edits, admission, preemption, evictions and controller restarts."""

    cluster: Cluster
    pending: dict[str, set[int]]

    @initialize(
        a=st.tuples(st.integers(1, 3), st.integers(1, 2)),
        b=st.tuples(st.integers(1, 2), st.integers(1, 3)),
    )
    def start(self, a: tuple[int, int], b: tuple[int, int]) -> None:
        self.cluster = Cluster(roles={"a": SimRole(*a), "b": SimRole(*b)})
        self.pending = {r: set() for r in ROLES}

    # ---- the controller -----------------------------------------------------------------

    def _protected(self) -> set[str]:
        """uids of Pods of current, complete, healthy replicas inside ``replicas``."""
        out: set[str] = set()
        for role, r in self.cluster.roles.items():
            for ordinal in range(r.replicas):
                members = self.cluster.replica(role, ordinal)
                if self.cluster.healthy_current(role, ordinal) and len(members) == r.size:
                    out |= {p.uid for p in members}
        return out

    def _gate_open(self) -> dict[str, bool]:
        """Per role: every declared replica holds an admitted Workload."""
        cluster = self.cluster
        out = {}
        for role, r in cluster.roles.items():
            out[role] = all(
                any(
                    w.admitted and w.owners & {p.uid for p in cluster.replica(role, o)}
                    for w in cluster.workloads.values()
                )
                for o in range(r.replicas)
            )
        return out

    def _running_replica(self, pod: ObservedPod) -> bool:
        """A complete replica inside ``replicas`` with no failed member that is not queued (a
        group that never ran): deleting it is a healthy rollout step, gated on admission."""
        cluster = self.cluster
        role = cluster.roles.get(pod.role or "")
        if role is None or pod.ordinal is None or pod.ordinal >= role.replicas:
            return False
        members = cluster.replica(pod.role or "", pod.ordinal)
        total = members[0].total if members else 0
        if sorted(p.member for p in members) != list(range(total)):
            return False
        if any(p.phase == "Failed" for p in members):
            return False
        uids = {p.uid for p in members}
        ever = any(w.ever_admitted and w.owners & uids for w in cluster.workloads.values())
        return ever or not all(p.gated for p in members)

    def _run(self, *, cut_after: int | None = None) -> None:
        protected = self._protected()
        gated = self._gate_open()
        step = self.cluster.plan()
        for pod in step.delete_pods:
            assert pod.uid not in protected, f"a current healthy replica was deleted: {pod}"
            if self._running_replica(pod):
                assert gated[pod.role or ""], f"{pod.name} deleted before admission"
        for role_step in step.roles:
            if role_step.replaced is not None:
                self.pending[role_step.role].add(role_step.replaced)
        deleted_roles = {p.role for p in step.delete_pods}
        assert not deleted_roles & {s.role for s in step.create}, "create and delete in one role"
        self.cluster.apply(step, cut_after=cut_after)
        self.cluster.settle()

    @rule()
    def reconcile(self) -> None:
        self._run()

    @rule(cut=st.integers(0, 3))
    def controller_killed_mid_pass(self, cut: int) -> None:
        self._run(cut_after=cut)

    # ---- users --------------------------------------------------------------------------

    @rule(role=st.sampled_from(ROLES), replicas=st.integers(1, 4))
    def scale(self, role: str, replicas: int) -> None:
        self.cluster.roles[role].replicas = replicas

    @rule(role=st.sampled_from(ROLES))
    def edit(self, role: str) -> None:
        self.cluster.roles[role].config += 1

    @rule(role=st.sampled_from(ROLES), size=st.integers(1, 3))
    def resize(self, role: str, size: int) -> None:
        r = self.cluster.roles[role]
        if r.size != size:
            self.cluster.roles[role] = replace(r, size=size, config=r.config + 1)

    @rule()
    def upgrade_renderer(self) -> None:
        self.cluster.render_version += 1

    @rule()
    def raise_floor(self) -> None:
        self.cluster.floor = self.cluster.render_version

    @rule(data=st.data())
    def kubectl_delete_pod(self, data: st.DataObject) -> None:
        standing = sorted(p.uid for p in self.cluster.standing())
        if standing:
            self.cluster.delete_pod(data.draw(st.sampled_from(standing)))
            self.cluster.settle()

    # ---- Kueue and the kubelet ----------------------------------------------------------

    @rule(data=st.data())
    def admit(self, data: st.DataObject) -> None:
        pods = self.cluster.pods
        waiting = sorted(n for n, w in self.cluster.workloads.items() if w.admissible(pods))
        if waiting:
            self.cluster.admit(data.draw(st.sampled_from(waiting)))

    @rule(data=st.data())
    def preempt(self, data: st.DataObject) -> None:
        admitted = sorted(
            n for n, w in self.cluster.workloads.items() if w.admitted and not w.evicted
        )
        if admitted:
            self.cluster.preempt(data.draw(st.sampled_from(admitted)))
            self.cluster.settle()

    @rule(data=st.data())
    def kubelet_evicts(self, data: st.DataObject) -> None:
        running = sorted(p.uid for p in self.cluster.standing() if p.phase == "Running")
        if running:
            pod = self.cluster.pods[data.draw(st.sampled_from(running))]
            pod.phase, pod.reason, pod.ready = "Failed", "Evicted", False

    @rule()
    def grace_periods_end(self) -> None:
        self.cluster.kubelet_finish()

    @rule()
    def kueue_finishes_deletions(self) -> None:
        self.cluster.kueue_drop_deleted()

    @rule(data=st.data())
    def node_not_ready(self, data: st.DataObject) -> None:
        running = sorted(p.uid for p in self.cluster.standing() if p.ready)
        if running:
            self.cluster.pods[data.draw(st.sampled_from(running))].ready = False

    # ---- invariants ---------------------------------------------------------------------

    @invariant()
    def one_configuration_per_instance(self) -> None:
        if not hasattr(self, "cluster"):
            return
        by_slot: dict[tuple[str, int], set[tuple[tuple[int, int], int]]] = {}
        for pod in self.cluster.pods.values():
            key = (pod.role, pod.ordinal)
            by_slot.setdefault(key, set()).add((pod.config, pod.render_version))
        mixed = {k: v for k, v in by_slot.items() if len(v) > 1}
        assert not mixed, f"an instance holds two configurations: {mixed}"

    @invariant()
    def one_unresolved_replacement_per_role(self) -> None:
        if not hasattr(self, "cluster"):
            return
        for role, ordinals in self.pending.items():
            r = self.cluster.roles[role]
            for ordinal in list(ordinals):
                if ordinal >= r.replicas or self.cluster.admitted_replica(role, ordinal):
                    ordinals.discard(ordinal)
            assert len(ordinals) <= 1, f"role {role} replaces {sorted(ordinals)} at once"

    def teardown(self) -> None:
        if not hasattr(self, "cluster"):
            return
        cluster = self.cluster
        for pod in cluster.standing():
            if pod.phase == "Running":
                pod.ready = True
        for _ in range(200):
            cluster.kubelet_finish()
            cluster.kueue_drop_deleted()
            for name, wl in list(cluster.workloads.items()):
                if wl.admissible(cluster.pods):
                    cluster.admit(name)
            step = cluster.plan()
            idle = not (step.delete_pods or step.create or step.delete_workloads)
            self._run()
            if idle and all(v is None for v in cluster.replacing.values()):
                break
        # Exactly the rendered seats, each held by one current Pod; nothing remembered.
        seats = sorted(
            (role, o, m)
            for role, r in cluster.roles.items()
            for o in range(r.replicas)
            for m in range(r.size)
        )
        held = sorted((p.role, p.ordinal, p.member) for p in cluster.pods.values())
        assert held == seats, f"did not converge: {held} != {seats}"
        assert all(cluster.current(p) and not p.terminating for p in cluster.pods.values())
        assert all(v is None for v in cluster.replacing.values()), cluster.replacing
        assert all(w.admitted for w in cluster.workloads.values())


RolloutMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestRolloutMachine = RolloutMachine.TestCase


def test_invariant_checker_catches_a_two_configuration_instance() -> None:
    """The invariant is not vacuous: a hand-built mixed instance trips it."""
    machine = RolloutMachine()
    machine.start(a=(1, 2), b=(1, 1))
    machine.cluster.create_seat("a", 0)
    pod = next(p for p in machine.cluster.pods.values() if p.member == 1)
    pod.config = (99, 2)
    try:
        machine.one_configuration_per_instance()
    except AssertionError:
        return
    raise AssertionError("the invariant did not fire")
