"""Scaling meets the rollout planner (D27, docs/autoscaling.md, "Scaling during a rollout"):

- added replicas are created from the current render, one replacement per role goes on;
- a scale-down never leaves a role with no serving replica while it has one: the lowest
  serving replica above the new count stays until a replica below it serves (for a ratio
  group, its whole unit);
- a scale-down removes the highest ordinals with their Workloads; the replicas that stay are
  never touched; a scale to zero removes everything.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import count

from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload
from gpustack_render.reconcile.rollout import Desired, DesiredRole, RolloutStep, plan

_uids = count()


def role(
    name: str = "decode",
    replicas: int = 2,
    *,
    config: str = "v2",
    group: str | None = None,
    per_unit: int = 1,
) -> DesiredRole:
    hashes = {(o, 0): f"{name}-{config}-{o}" for o in range(replicas)}
    return DesiredRole(
        name,
        replicas,
        1,
        hashes,
        tuple(f"g-{name}-{o}" for o in range(replicas)),
        unit_group=group,
        per_unit=per_unit,
    )


def pod(ordinal: int, *, role: str = "decode", config: str = "v2", **kw: object) -> ObservedPod:
    uid = f"uid-{next(_uids)}"
    base = ObservedPod(
        name=f"md-{role}-{ordinal}-{uid}",
        uid=uid,
        role=role,
        ordinal=ordinal,
        group=f"g-{role}-{ordinal}",
        pod_spec_hash=f"{role}-{config}-{ordinal}",
        render_version=1,
        group_total=1,
        phase="Running",
        ready=True,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def wl(p: ObservedPod, *, admitted: bool = True) -> ObservedWorkload:
    return ObservedWorkload(
        name=f"wl-{p.group}",
        owner_pods=frozenset({p.uid}),
        quota_reserved=admitted,
        admitted=admitted,
        ever_admitted=admitted,
    )


def run(
    roles: tuple[DesiredRole, ...],
    pods: list[ObservedPod],
    *,
    queued: tuple[ObservedPod, ...] = (),
    replacing: dict[str, int | None] | None = None,
) -> RolloutStep:
    workloads = [wl(p, admitted=p not in queued) for p in pods]
    return plan(
        desired=Desired(roles),
        pods=pods,
        workloads=workloads,
        replacing=replacing or {},
    )


def deleted(step: RolloutStep) -> list[tuple[str | None, int | None]]:
    return [(p.role, p.ordinal) for p in step.delete_pods]


def created(step: RolloutStep) -> list[tuple[str, int]]:
    return [(s.role, s.ordinal) for s in step.create]


def test_a_scale_down_removes_the_highest_ordinals_and_their_workloads_only() -> None:
    pods = [pod(o) for o in range(5)]
    step = run((role(replicas=2),), pods)
    assert deleted(step) == [("decode", 4), ("decode", 3), ("decode", 2)]
    assert set(step.delete_workloads) == {"wl-g-decode-4", "wl-g-decode-3", "wl-g-decode-2"}
    assert step.create == ()


def test_queued_replicas_a_scale_up_added_are_the_first_a_scale_down_removes() -> None:
    """A scale-up beyond quota leaves its new, highest ordinals queued; scaling back down
    removes exactly those, and the admitted replicas stay untouched."""
    pods = [pod(o, ready=o < 3, gated=o >= 3) for o in range(5)]
    step = run((role(replicas=3),), pods, queued=tuple(pods[3:]))
    assert deleted(step) == [("decode", 4), ("decode", 3)]
    assert {p.uid for p in step.delete_pods}.isdisjoint(p.uid for p in pods[:3])


def test_a_scale_down_during_a_rollout_keeps_the_last_serving_replica() -> None:
    """Replacing ordinal 0 (deleted, its replacement not ready yet) while 1 and 2 serve the old
    configuration: a scale-down to 1 would leave nothing serving, so ordinal 1 stays (2 goes)
    until the replacement at 0 serves."""
    new0 = pod(0, ready=False)
    old1, old2 = pod(1, config="v1"), pod(2, config="v1")
    step = run((role(replicas=1),), [new0, old1, old2], replacing={"decode": 0})
    assert deleted(step) == [("decode", 2)]
    assert step.requeue
    # Once the replacement serves, the kept replica goes too.
    step = run((role(replicas=1),), [pod(0), old1], replacing={"decode": 0})
    assert deleted(step) == [("decode", 1)]


def test_a_scale_down_keeps_a_serving_replica_when_the_kept_ones_are_queued() -> None:
    """Ordinal 0 was preempted and waits for quota; 1 and 2 serve: scaling to 1 keeps 1."""
    queued0 = pod(0, ready=False, gated=True)
    pods = [queued0, pod(1), pod(2)]
    step = run((role(replicas=1),), pods, queued=(queued0,))
    assert deleted(step) == [("decode", 2)]


def test_a_scale_to_zero_removes_every_replica() -> None:
    pods = [pod(0, ready=False), pod(1)]
    step = run((role(replicas=0),), pods)
    assert deleted(step) == [("decode", 1), ("decode", 0)]


def test_a_ratio_group_keeps_a_whole_unit_back_never_half_of_one() -> None:
    """prefill 1 : decode 2, going from 3 units to 1 while unit 0's decoders are being replaced
    (not serving): unit 1 stays whole (prefill 1, decode 2 and 3), unit 2 leaves whole."""
    prefill = [pod(o, role="prefill") for o in range(3)]
    decode = [pod(o, ready=o >= 2) for o in range(6)]
    roles = (
        role("prefill", 1, group="pd", per_unit=1),
        role("decode", 2, group="pd", per_unit=2),
    )
    step = run(roles, prefill + decode)
    assert sorted(deleted(step)) == [("decode", 4), ("decode", 5), ("prefill", 2)]


def test_added_replicas_take_the_new_configuration_and_the_cadence_holds() -> None:
    """An edit rolled the role (v1 → v2) and the autoscaler asks for two more replicas: the
    pass creates the added ordinals (the planner schedules seats, the controller stamps them
    from the current rendering: v2) and replaces no healthy replica, because the added ones
    are not admitted yet (the seed's gate counts every declared replica). Once they are, the
    rollout goes on one replacement per role per pass."""
    old = [pod(o, config="v1") for o in range(2)]
    step = run((role(replicas=4),), old)
    assert created(step) == [("decode", 2), ("decode", 3)]
    assert step.delete_pods == ()
    step_role = step.role("decode")
    assert step_role is not None and step_role.outdated == 2
    added = [pod(2, ready=False, gated=True), pod(3, ready=False, gated=True)]
    step = run((role(replicas=4),), old + added, queued=tuple(added))
    assert step.delete_pods == () and step.create == ()
    step_role = step.role("decode")
    assert step_role is not None and step_role.held_by_admission
    # Admitted: one outdated replica goes, the highest first; nothing else.
    step = run((role(replicas=4),), [*old, pod(2), pod(3)])
    assert deleted(step) == [("decode", 1)]
    assert step.replacing == {"decode": 1} and step.persist_first
