"""The rollout planner's Elastic EP rule (docs/contract/elastic-ep.md §3.8, D29): an elastic role
is never rolled, scaled down or shed; its terminal members are deleted with their Workloads; its
missing ordinals below the width are created; the Ray head (a companion component) is left
alone."""

from __future__ import annotations

from dataclasses import replace

from test_rollout_planner import admitted, pod, role, wl

from gpustack_render.reconcile.rollout import Desired, Seat, plan

HEAD = "md-elastic-head"


def elastic(width: int, *, config: str = "v1") -> Desired:
    return Desired(
        (replace(role(replicas=width, config=config), elastic=True),),
        companions=frozenset({HEAD}),
    )


def test_width_raise_creates_the_missing_ordinals_and_touches_nobody() -> None:
    members = [pod(0), pod(1)]
    head = pod(0, role=HEAD)
    step = plan(
        desired=elastic(4), pods=[*members, head], workloads=admitted(*members), replacing={}
    )
    assert step.create == (Seat("server", 2), Seat("server", 3))
    assert step.delete_pods == () and step.delete_workloads == ()


def test_outdated_members_are_never_rolled() -> None:
    members = [pod(0), pod(1)]
    step = plan(
        desired=elastic(2, config="v2"), pods=members, workloads=admitted(*members), replacing={}
    )
    assert step.delete_pods == () and step.create == ()
    assert step.replacing == {"server": None} and not step.persist_first
    role_step = step.role("server")
    assert role_step is not None and role_step.outdated == 2


def test_members_above_the_width_and_duplicates_are_never_deleted() -> None:
    members = [pod(0), pod(1), pod(2), pod(1, name="dup"), pod(None)]
    step = plan(desired=elastic(2), pods=members, workloads=admitted(*members), replacing={})
    assert step.delete_pods == () and step.delete_workloads == () and step.create == ()


def test_a_terminal_member_is_deleted_with_its_workload_then_recreated() -> None:
    failed = pod(1, phase="Failed", ready=False)
    members = [pod(0), failed]
    workloads = [wl(members[0]), wl(failed, name="wl-failed")]
    step = plan(desired=elastic(2), pods=members, workloads=workloads, replacing={})
    assert [p.uid for p in step.delete_pods] == [failed.uid]
    assert step.delete_workloads == ("wl-failed",)
    assert step.create == () and step.requeue


def test_the_head_is_no_role_gone_from_the_spec() -> None:
    head = pod(0, role=HEAD)
    step = plan(desired=elastic(2), pods=[head], replacing={})
    assert step.delete_pods == ()
    # Without the companion mark, the head would be a Pod of a role no longer in the spec.
    bare = Desired(elastic(2).roles)
    assert [p.uid for p in plan(desired=bare, pods=[head], replacing={}).delete_pods] == [head.uid]
