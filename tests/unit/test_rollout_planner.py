"""Table-driven tests of the rollout planner (docs/contract/controller.md §4–§7, the seed's rollout
rules)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from itertools import count

import pytest

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.rollout import Desired, DesiredRole, RolloutStep, Seat, Tier, plan

_uids = count()


def role(
    name: str = "server", *, replicas: int = 2, size: int = 1, config: str = "v1"
) -> DesiredRole:
    hashes = {(o, m): f"{name}-{config}-{o}-{m}" for o in range(replicas) for m in range(size)}
    return DesiredRole(
        name, replicas, size, hashes, tuple(f"g-{name}-{o}" for o in range(replicas))
    )


def pod(
    ordinal: int | None,
    member: int = 0,
    *,
    role: str = "server",
    config: str = "v1",
    size: int = 1,
    name: str | None = None,
    **kw: object,
) -> ObservedPod:
    uid = f"uid-{next(_uids)}"
    o = "x" if ordinal is None else ordinal
    base = ObservedPod(
        name=name or f"md-{role}-{o}-{member}-{uid}",
        uid=uid,
        role=role,
        ordinal=ordinal,
        member=member,
        group=None if ordinal is None else f"g-{role}-{ordinal}",
        pod_spec_hash=f"{role}-{config}-{o}-{member}",
        render_version=1,
        group_total=size,
        phase="Running",
        ready=True,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def wl(*pods: ObservedPod, admitted: bool = True, **kw: object) -> ObservedWorkload:
    name = pods[0].group or pods[0].name
    base = ObservedWorkload(
        name=f"wl-{name}-{pods[0].uid}",
        owner_pods=frozenset(p.uid for p in pods),
        quota_reserved=admitted,
        admitted=admitted,
        ever_admitted=admitted,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def admitted(*pods: ObservedPod) -> list[ObservedWorkload]:
    """One admitted Workload per replica (pods grouped by ordinal)."""
    groups: dict[tuple[str | None, int | None], list[ObservedPod]] = {}
    for p in pods:
        groups.setdefault((p.role, p.ordinal), []).append(p)
    return [wl(*members) for members in groups.values()]


@dataclass
class Case:
    roles: tuple[DesiredRole, ...]
    pods: list[ObservedPod]
    workloads: list[ObservedWorkload] = field(default_factory=list)
    replacing: dict[str, int | None] = field(default_factory=dict)
    cache_hold: bool = False
    floor: int = 1
    current: int = 1
    blocked: frozenset[str] = frozenset()

    def run(self) -> RolloutStep:
        return plan(
            desired=Desired(self.roles, floor=self.floor, render_version=self.current),
            pods=self.pods,
            workloads=self.workloads,
            replacing=self.replacing,
            cache_hold=self.cache_hold,
            blocked_queues=self.blocked,
        )


def deleted(result: RolloutStep) -> list[tuple[str | None, int | None, int]]:
    return [(p.role, p.ordinal, p.member) for p in result.delete_pods]


def created(result: RolloutStep) -> list[tuple[str, int]]:
    return [(s.role, s.ordinal) for s in result.create]


# ---- scale ---------------------------------------------------------------------------------


def test_first_pass_creates_every_seat_lowest_ordinal_first() -> None:
    result = Case((role(replicas=3), role("decode", replicas=1, size=2)), []).run()
    assert created(result) == [("server", 0), ("server", 1), ("server", 2), ("decode", 0)]
    assert result.create[0] == Seat("server", 0)
    assert not result.delete_pods and not result.persist_first


def test_scale_up_is_immediate_for_never_used_ordinals() -> None:
    pods = [pod(0), pod(1)]
    result = Case((role(replicas=4),), pods, admitted(*pods)).run()
    assert created(result) == [("server", 2), ("server", 3)]
    assert not result.delete_pods


def test_create_gate_waits_out_a_pod_still_holding_the_group_name() -> None:
    pods = [pod(0), pod(1, terminating=True), pod(2, owned=False, terminating=False)]
    result = Case((role(replicas=4),), pods, admitted(pods[0])).run()
    # Ordinal 1 is still held by its terminating Pod, ordinal 2 by a Pod someone else owns.
    assert created(result) == [("server", 3)]
    step = result.role("server")
    assert step is not None and step.waiting_ordinals == (1, 2)
    assert result.requeue


# ---- a LocalQueue feeding another ClusterQueue (§10) -------------------------------------------


def queued(desired: DesiredRole, queue: str) -> DesiredRole:
    return replace(desired, queue=queue)


def test_a_blocked_queue_creates_no_pod_of_its_roles_and_reports_the_seats() -> None:
    roles = (
        queued(role("prefill", replicas=2), "entrance-a"),
        queued(role("decode", replicas=1, size=2), "entrance-b"),
    )
    result = Case(roles, [], blocked=frozenset({"entrance-a"})).run()
    assert created(result) == [("decode", 0)]
    assert result.blocked == (Seat("prefill", 0), Seat("prefill", 1))
    # Blocked seats hold nothing in flight: the controller looks at the queue on its own cadence.
    assert not result.requeue
    unblocked = Case(roles, []).run()
    assert created(unblocked) == [("prefill", 0), ("prefill", 1), ("decode", 0)]
    assert unblocked.blocked == ()


def _blocked_server(pods: list[ObservedPod]) -> RolloutStep:
    """Three declared replicas on a blocked queue, replica 0 admitted."""
    roles = (queued(role(replicas=3), "entrance"),)
    return Case(roles, pods, admitted(pods[0]), blocked=frozenset({"entrance"})).run()


def test_a_blocked_role_still_scales_down_and_waits_out_held_group_names() -> None:
    result = _blocked_server([pod(0), pod(1, terminating=True), pod(3)])
    # Ordinal 3 is beyond the declared replicas: deleted as ever; nothing created this pass.
    assert deleted(result) == [("server", 3, 0)]
    assert result.create == () and result.blocked == ()
    result = _blocked_server([pod(0), pod(1, terminating=True)])
    step = result.role("server")
    assert step is not None and step.waiting_ordinals == (1,)
    assert result.blocked == (Seat("server", 2),)
    assert result.create == ()


def test_a_role_without_a_known_queue_is_never_blocked() -> None:
    result = Case((role(replicas=1),), [], blocked=frozenset({""})).run()
    assert created(result) == [("server", 0)]


def test_create_gate_waits_out_a_deleted_workload_still_holding_the_group_name() -> None:
    """Kueue keeps a deleted Workload until its group stopped and attaches new Pods of the
    same group name to it: the ordinal waits until it is gone."""
    pods = [pod(0)]
    lingering = ObservedWorkload(name="g-server-1", deleting=True)
    result = Case((role(),), pods, [*admitted(*pods), lingering]).run()
    assert not result.create and result.requeue
    assert result.delete_workloads == ()
    step = result.role("server")
    assert step is not None and step.waiting_ordinals == (1,)


def test_a_leftover_workload_of_a_group_without_pods_is_deleted_and_the_ordinal_waits() -> None:
    pods = [pod(0)]
    leftover = ObservedWorkload(name="g-server-1")
    result = Case((role(),), pods, [*admitted(*pods), leftover]).run()
    assert not result.create and result.requeue
    assert result.delete_workloads == ("g-server-1",)


def test_scale_down_sheds_highest_ordinals_first_with_their_workloads() -> None:
    pods = [pod(o) for o in range(4)]
    workloads = admitted(*pods)
    result = Case((role(replicas=2),), pods, workloads).run()
    assert deleted(result) == [("server", 3, 0), ("server", 2, 0)]
    assert set(result.delete_workloads) == {workloads[3].name, workloads[2].name}
    assert not result.create


def test_scale_down_never_touches_an_outdated_survivor_in_the_same_pass() -> None:
    pods = [pod(0, config="old"), pod(1, config="old"), pod(2)]
    result = Case((role(replicas=2),), pods, admitted(*pods)).run()
    assert deleted(result) == [("server", 2, 0)]
    assert result.replacing == {"server": None}


def test_no_create_in_a_role_that_deletes_this_pass() -> None:
    pods = [pod(1), pod(2)]  # ordinal 0 missing, 2 removed
    result = Case((role(replicas=2),), pods, admitted(*pods)).run()
    assert deleted(result) == [("server", 2, 0)]
    assert created(result) == []
    assert result.requeue


# ---- rollout ------------------------------------------------------------------------------


def test_an_edit_replaces_the_highest_ordinal_once_every_replica_is_admitted() -> None:
    pods = [pod(0, config="old"), pod(1, config="old"), pod(2, config="old")]
    workloads = admitted(*pods)
    result = Case((role(replicas=3),), pods, workloads).run()
    assert deleted(result) == [("server", 2, 0)]
    assert result.delete_workloads == (workloads[2].name,)
    assert result.replacing == {"server": 2}
    assert result.persist_first
    step = result.role("server")
    assert step is not None and step.tier == Tier.HEALTHY and step.replaced == 2


def test_a_healthy_replica_waits_until_every_replica_holds_an_admitted_workload() -> None:
    pods = [pod(0, config="old"), pod(1, config="old")]
    workloads = [wl(pods[0]), wl(pods[1], admitted=False, ever_admitted=True)]
    result = Case((role(),), pods, workloads).run()
    assert not result.delete_pods
    step = result.role("server")
    assert step is not None and step.held_by_admission and result.requeue
    assert result.replacing == {"server": None}


def test_a_missing_replica_also_closes_the_admission_gate() -> None:
    pods = [pod(0, config="old")]
    result = Case((role(replicas=2),), pods, admitted(*pods)).run()
    assert not result.delete_pods
    assert created(result) == [("server", 1)]


def test_a_queued_never_admitted_group_is_replaced_before_an_admitted_sibling() -> None:
    queued = pod(0, config="old", gated=True, phase="Pending", ready=False)
    running = pod(1, config="old")
    workloads = [wl(queued, admitted=False, ever_admitted=False), wl(running)]
    result = Case((role(),), [queued, running], workloads).run()
    assert deleted(result) == [("server", 0, 0)]
    step = result.role("server")
    assert step is not None and step.tier == Tier.QUEUED
    assert result.replacing == {"server": 0}


@pytest.mark.parametrize(
    "disqualify",
    [
        pytest.param(lambda w: replace(w, ever_admitted=True), id="evicted-before"),
        pytest.param(lambda w: replace(w, preempted=True, ever_admitted=True), id="preempted"),
    ],
)
def test_a_group_that_ran_before_is_not_queued(
    disqualify: Callable[[ObservedWorkload], ObservedWorkload],
) -> None:
    queued = pod(0, config="old", gated=True, phase="Pending", ready=False)
    running = pod(1, config="old")
    workloads = [disqualify(wl(queued, admitted=False)), wl(running)]
    result = Case((role(),), [queued, running], workloads).run()
    assert not result.delete_pods  # healthy tier: the gate is closed by ordinal 0


def test_a_group_with_an_ungated_member_is_not_queued() -> None:
    a = pod(0, 0, size=2, config="old", gated=True)
    b = pod(0, 1, size=2, config="old", gated=False)
    other = [pod(1, 0, size=2, config="old"), pod(1, 1, size=2, config="old")]
    workloads = [wl(a, b, admitted=False, ever_admitted=False), wl(*other)]
    result = Case((role(size=2),), [a, b, *other], workloads).run()
    assert not result.delete_pods


def test_the_remembered_replacement_is_recreated_and_no_other_replica_is_chosen() -> None:
    pods = [pod(0, config="old"), pod(2, config="old")]
    result = Case((role(replicas=3),), pods, admitted(*pods), {"server": 1}).run()
    assert created(result) == [("server", 1)]
    assert not result.delete_pods
    assert result.replacing == {"server": 1} and not result.persist_first


def test_a_replacement_waits_for_its_fresh_admission() -> None:
    pods = [pod(0, config="old"), pod(1)]
    workloads = [wl(pods[0]), wl(pods[1], admitted=False, ever_admitted=False)]
    result = Case((role(),), pods, workloads, {"server": 1}).run()
    assert not result.delete_pods and not result.create
    assert result.replacing == {"server": 1} and result.requeue


def test_an_admitted_replacement_resolves_and_the_next_replica_rolls_in_the_same_pass() -> None:
    pods = [pod(0, config="old"), pod(1, config="old"), pod(2)]
    result = Case((role(replicas=3),), pods, admitted(*pods), {"server": 2}).run()
    assert deleted(result) == [("server", 1, 0)]
    assert result.replacing == {"server": 1}


def test_a_queued_replacement_is_superseded_by_a_newer_edit() -> None:
    queued = pod(1, config="v1", gated=True, phase="Pending", ready=False)
    pods = [pod(0, config="v1"), queued]
    workloads = [wl(pods[0]), wl(queued, admitted=False, ever_admitted=False)]
    r = role(config="v2")
    result = Case((r,), pods, workloads, {"server": 1}).run()
    assert deleted(result) == [("server", 1, 0)]
    assert result.replacing == {"server": 1}
    step = result.role("server")
    assert step is not None and step.tier == Tier.OUTDATED


def test_an_interrupted_deletion_is_completed_whole() -> None:
    # Size 2: the controller died after deleting m1 of the remembered replica.
    m0 = pod(1, 0, size=2, config="old")
    survivors = [pod(0, 0, size=2, config="old"), pod(0, 1, size=2, config="old")]
    result = Case((role(size=2),), [*survivors, m0], admitted(*survivors, m0), {"server": 1}).run()
    assert deleted(result) == [("server", 1, 0)]
    assert not result.create


def test_a_replacement_losing_a_member_is_rebuilt_in_its_own_slot() -> None:
    m0 = pod(1, 0, size=2)
    old = [pod(0, 0, size=2, config="old"), pod(0, 1, size=2, config="old")]
    workloads = [wl(*old), wl(m0, admitted=False, ever_admitted=False)]
    result = Case((role(size=2),), [*old, m0], workloads, {"server": 1}).run()
    assert deleted(result) == [("server", 1, 0)]
    assert result.replacing == {"server": 1}


def test_a_broken_replica_waits_behind_an_unresolved_replacement() -> None:
    broken = pod(0, config="old", phase="Failed", reason="Evicted", ready=False)
    pending = pod(1)
    workloads = [wl(broken), wl(pending, admitted=False, ever_admitted=False)]
    result = Case((role(),), [broken, pending], workloads, {"server": 1}).run()
    assert not result.delete_pods
    # Once the replacement is admitted, the broken replica is rebuilt whole before any other.
    workloads = [wl(broken), wl(pending)]
    result = Case((role(),), [broken, pending], workloads, {"server": 1}).run()
    assert deleted(result) == [("server", 0, 0)]
    step = result.role("server")
    assert step is not None and step.tier == Tier.BROKEN and result.replacing == {"server": 0}


@pytest.mark.parametrize(
    "pods",
    [
        pytest.param(
            [pod(0, 0, size=2), pod(0, 1, size=2, phase="Failed", reason="Evicted")],
            id="failed-member",
        ),
        pytest.param([pod(0, 0, size=2)], id="lost-a-member"),
        pytest.param([pod(0, 0, size=2), pod(0, 0, size=2, name="zz")], id="two-leaders"),
    ],
)
def test_a_broken_replica_is_rebuilt_whole_without_waiting_for_admission(
    pods: list[ObservedPod],
) -> None:
    other = [pod(1, 0, size=2), pod(1, 1, size=2)]
    workloads = [wl(*pods, admitted=False, ever_admitted=True), wl(*other, admitted=False)]
    result = Case((role(size=2),), [*pods, *other], workloads).run()
    assert sorted(deleted(result)) == sorted((p.role, p.ordinal, p.member) for p in pods)
    assert result.replacing == {"server": 0} and result.persist_first
    assert not result.create


def test_a_replica_on_a_not_ready_node_is_left_alone() -> None:
    pods = [pod(0, ready=False, node_name="node-gone"), pod(1)]
    result = Case((role(),), pods, admitted(*pods)).run()
    assert not result.delete_pods and not result.create
    assert not result.requeue


def test_a_replica_without_its_pod_is_recreated_and_a_stranded_workload_deleted() -> None:
    leaving = pod(1, terminating=True)
    pods = [pod(0), leaving]
    workloads = admitted(*pods)
    result = Case((role(),), pods, workloads).run()
    assert result.delete_workloads == (workloads[1].name,)
    assert not result.delete_pods
    assert created(result) == []  # its group name is still held
    assert result.requeue


def test_a_workload_still_owning_a_standing_pod_is_not_stranded() -> None:
    leaving = pod(0, terminating=True, name="md-old")
    staying = pod(0, name="md-new")
    shared = wl(leaving, staying)
    result = Case((role(replicas=1),), [leaving, staying], [shared]).run()
    assert result.delete_workloads == ()
    assert not result.delete_pods


# ---- render-version floor ---------------------------------------------------------------


def test_a_replica_below_the_floor_is_outdated() -> None:
    pods = [pod(0, render_version=1), pod(1, render_version=2)]
    result = Case((role(),), pods, admitted(*pods), floor=2, current=2).run()
    assert deleted(result) == [("server", 0, 0)]


def test_an_older_but_compatible_render_version_is_kept() -> None:
    pods = [pod(0, render_version=1), pod(1, render_version=2)]
    result = Case((role(),), pods, admitted(*pods), floor=1, current=2).run()
    assert not result.delete_pods
    step = result.role("server")
    assert step is not None and step.outdated == 0 and step.compatible_older == 1


# ---- surplus, orphans, removed roles ------------------------------------------------------


def test_surplus_sheds_the_duplicate_whose_hash_does_not_match_its_seat() -> None:
    keeper = pod(0, name="a-keeper")
    stray = pod(0, config="old", name="z-stray")
    other = pod(1)
    result = Case((role(),), [keeper, stray, other], admitted(keeper, other)).run()
    assert [p.name for p in result.delete_pods] == ["z-stray"]
    step = result.role("server")
    assert step is not None and step.shed and result.requeue


def test_surplus_keeps_the_greatest_name_among_matching_duplicates() -> None:
    a, b = pod(0, name="md-a"), pod(0, name="md-b")
    shared = wl(a, b)
    result = Case((role(replicas=1),), [a, b], [shared]).run()
    assert [p.name for p in result.delete_pods] == ["md-a"]
    assert shared.name not in result.delete_workloads  # the keeper still holds it


def test_an_orphan_is_deleted_without_a_remembered_ordinal() -> None:
    orphan = pod(None)
    pods = [pod(0), pod(1), orphan]
    result = Case((role(replicas=3),), pods, admitted(*pods)).run()
    # Three kept Pods for three seats: no surplus; the orphan is tier a, lowest.
    assert [p.uid for p in result.delete_pods] == [orphan.uid]
    assert result.replacing == {"server": None} and not result.persist_first


def test_pods_of_a_role_no_longer_declared_are_deleted_with_their_workloads() -> None:
    gone = pod(0, role="old")
    pods = [pod(0), pod(1), gone]
    workloads = admitted(*pods)
    result = Case((role(),), pods, workloads).run()
    assert deleted(result) == [("old", 0, 0)]
    assert workloads[2].name in result.delete_workloads


def test_pods_not_owned_are_never_deleted() -> None:
    foreign = pod(0, owned=False, config="old")
    result = Case((role(replicas=1),), [foreign]).run()
    assert not result.delete_pods
    assert created(result) == []  # its group name blocks the ordinal


# ---- holds and memory edges ---------------------------------------------------------------


def test_cache_hold_deletes_nothing_in_an_outdated_role() -> None:
    pods = [pod(0, config="old"), pod(1, config="old")]
    result = Case((role(),), pods, admitted(*pods), cache_hold=True).run()
    assert not result.delete_pods
    step = result.role("server")
    assert step is not None and step.held_by_cache and result.requeue


def test_cache_hold_does_not_stop_scale_down() -> None:
    pods = [pod(0, config="old"), pod(1, config="old"), pod(2, config="old")]
    result = Case((role(),), pods, admitted(*pods), cache_hold=True).run()
    assert deleted(result) == [("server", 2, 0)]


def test_a_remembered_ordinal_beyond_replicas_is_forgotten() -> None:
    pods = [pod(0)]
    result = Case((role(replicas=1),), pods, admitted(*pods), {"server": 3}).run()
    assert result.replacing == {"server": None}


def test_a_size_edit_rolls_old_instances_through_the_admission_gate() -> None:
    # Old instances of size 2 under a spec of size 3 are outdated, not broken.
    old = [pod(o, m, size=2, config="old") for o in range(2) for m in range(2)]
    workloads = [wl(*old[:2]), wl(*old[2:], admitted=False, ever_admitted=True)]
    result = Case((role(size=3),), old, workloads).run()
    assert not result.delete_pods
    workloads = [wl(*old[:2]), wl(*old[2:])]
    result = Case((role(size=3),), old, workloads).run()
    assert deleted(result) == [("server", 1, 1), ("server", 1, 0)]


def test_an_edit_to_one_role_leaves_its_sibling_alone() -> None:
    prefill = [pod(0, role="prefill", config="old"), pod(1, role="prefill", config="old")]
    decode = [pod(0, role="decode"), pod(1, role="decode")]
    result = Case(
        (role("prefill"), role("decode")), [*prefill, *decode], admitted(*prefill, *decode)
    ).run()
    assert deleted(result) == [("prefill", 1, 0)]
    assert result.replacing == {"prefill": 1, "decode": None}


def test_each_role_replaces_at_most_one_replica_per_pass() -> None:
    pods = [pod(o, config="old") for o in range(4)]
    result = Case((role(replicas=4),), pods, admitted(*pods)).run()
    assert len(result.delete_pods) == 1
