"""The joint multi-role admission check's verdicts (docs/contract/controller.md §9,
``jointcheck.py``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gpustack_render.reconcile.jointcheck import (
    CHECK_NAME,
    CONTROLLER_NAME,
    JointDeployment,
    active_condition_apply,
    admission_check_object,
    check_entry_apply,
    joint_verdict,
    needs_verdict,
    rfc3339,
)
from gpustack_render.reconcile.observed import CheckState, ObservedPod, ObservedWorkload

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pod(role: str, ordinal: int, **kw: object) -> ObservedPod:
    return replace(
        ObservedPod(
            name=f"{role}-{ordinal}",
            uid=f"u-{role}-{ordinal}",
            role=role,
            ordinal=ordinal,
            group_total=1,
        ),
        **kw,  # type: ignore[arg-type]
    )


def wl(p: ObservedPod, *, reserved: bool = True, **kw: object) -> ObservedWorkload:
    return replace(
        ObservedWorkload(
            name=f"wl-{p.name}",
            owner_pods=frozenset({p.uid}),
            quota_reserved=reserved,
            checks={CHECK_NAME: CheckState("Pending")},
        ),
        **kw,  # type: ignore[arg-type]
    )


ROLES = (("prefill", 1), ("decode", 2))


def deployment(
    pods: list[ObservedPod], workloads: list[ObservedWorkload], **kw: object
) -> JointDeployment:
    return replace(JointDeployment("pd", ROLES, pods, workloads), **kw)  # type: ignore[arg-type]


def test_acts_only_on_a_reserved_active_unadmitted_workload_listing_the_check() -> None:
    base = wl(pod("prefill", 0))
    assert needs_verdict(base)
    for other in (
        replace(base, quota_reserved=False),
        replace(base, admitted=True),
        replace(base, evicted=True),
        replace(base, finished=True),
        replace(base, active=False),
        replace(base, checks={}),
    ):
        assert not needs_verdict(other)


def test_not_a_deployment_or_a_single_role_is_ready() -> None:
    w = wl(pod("server", 0))
    assert joint_verdict(workload=w, deployment=None, now=NOW).state == "Ready"
    single = JointDeployment("one", (("server", 2),), [], [])
    verdict = joint_verdict(workload=w, deployment=single, now=NOW)
    assert verdict.state == "Ready" and "single role" in verdict.message


def test_ready_once_every_replica_reserved_quota() -> None:
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(p) for p in pods]
    verdict = joint_verdict(workload=workloads[0], deployment=deployment(pods, workloads), now=NOW)
    assert verdict.state == "Ready" and not verdict.park


def test_pending_names_k_of_n_and_the_waiting_roles() -> None:
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1]), wl(pods[2], reserved=False)]
    verdict = joint_verdict(workload=workloads[0], deployment=deployment(pods, workloads), now=NOW)
    assert verdict.state == "Pending"
    assert "2 of 3" in verdict.message and "decode" in verdict.message
    assert "kept" in verdict.message
    assert verdict.roles == ("decode",)


def test_pending_names_the_assembling_roles() -> None:
    pods = [pod("prefill", 0), pod("decode", 0)]
    workloads = [wl(pods[0]), wl(pods[1])]
    verdict = joint_verdict(workload=workloads[0], deployment=deployment(pods, workloads), now=NOW)
    assert verdict.state == "Pending"
    assert "decode" in verdict.message and "assembling" in verdict.message
    assert verdict.roles == ("decode",)


def test_a_fresh_group_without_a_workload_is_not_counted_as_reserved() -> None:
    # All or nothing (per seed): a decode replica Kueue has not composed yet holds no quota.
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1])]
    verdict = joint_verdict(workload=workloads[0], deployment=deployment(pods, workloads), now=NOW)
    assert verdict.state == "Pending"


def test_the_slot_this_operator_is_rebuilding_counts_as_reserved() -> None:
    pods = [pod("prefill", 0), pod("decode", 0)]
    workloads = [wl(pods[0]), wl(pods[1])]
    rolling = deployment(pods, workloads, replacing={"decode": 1})
    assert joint_verdict(workload=workloads[0], deployment=rolling, now=NOW).state == "Ready"
    deleting = replace(rolling, deleting=True)
    assert joint_verdict(workload=workloads[0], deployment=deleting, now=NOW).state == "Pending"


def test_a_settled_pending_parks_after_thirty_minutes() -> None:
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1]), wl(pods[2], reserved=False)]
    since = rfc3339(NOW - timedelta(minutes=31))
    waiting = replace(workloads[0], checks={CHECK_NAME: CheckState("Pending", "x", since)})
    verdict = joint_verdict(workload=waiting, deployment=deployment(pods, workloads), now=NOW)
    assert verdict.state == "Pending" and verdict.park
    for fact in ("parked", "30 min", "does not clear", "reactivate", "recreate"):
        assert fact in verdict.message
    recent = replace(
        workloads[0],
        checks={CHECK_NAME: CheckState("Pending", "x", rfc3339(NOW - timedelta(minutes=29)))},
    )
    assert not joint_verdict(workload=recent, deployment=deployment(pods, workloads), now=NOW).park


@pytest.mark.parametrize(
    ("previous", "state", "expected_time"),
    [
        pytest.param(None, "Pending", rfc3339(NOW), id="first"),
        pytest.param(
            CheckState("Pending", "", "2025-12-31T00:00:00Z"),
            "Pending",
            "2025-12-31T00:00:00Z",
            id="unchanged",
        ),
        pytest.param(
            CheckState("Pending", "", "2025-12-31T00:00:00Z"), "Ready", rfc3339(NOW), id="changed"
        ),
    ],
)
def test_check_entry_keeps_its_transition_time(
    previous: CheckState | None, state: str, expected_time: str
) -> None:
    from gpustack_render.reconcile.jointcheck import CheckVerdict

    body = check_entry_apply(
        namespace="team-a",
        workload="w",
        verdict=CheckVerdict(state, "m"),
        previous=previous,
        now=NOW,
    )
    (entry,) = body["status"]["admissionChecks"]
    assert entry == {
        "name": CHECK_NAME,
        "state": state,
        "lastTransitionTime": expected_time,
        "message": "m",
    }
    assert body["metadata"] == {"name": "w", "namespace": "team-a"}


def test_admission_check_object_and_active_condition() -> None:
    obj = admission_check_object()
    assert obj["metadata"]["name"] == "gpustack-model-deployment-joint"
    assert obj["spec"]["controllerName"] == CONTROLLER_NAME
    (cond,) = active_condition_apply(previous_since=None, now=NOW)["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Active", "True", "Ready")
    assert "running" in cond["message"]


def _waiting_for(
    entry_minutes: float, quota_minutes: float | None, p: ObservedPod
) -> ObservedWorkload:
    quota = rfc3339(NOW - timedelta(minutes=quota_minutes)) if quota_minutes is not None else None
    entry = CheckState("Pending", "x", rfc3339(NOW - timedelta(minutes=entry_minutes)))
    return wl(p, checks={CHECK_NAME: entry}, quota_reserved_since=quota)


def test_the_parking_clock_starts_at_the_later_of_the_entry_and_the_quota_reservation() -> None:
    """Kueue adds the check entry as Pending before quota is reserved: a group that waited
    40 min for quota and got it 5 min ago is not parked."""
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1]), wl(pods[2], reserved=False)]
    fresh_quota = _waiting_for(40, 5, pods[0])
    md = deployment(pods, workloads)
    assert not joint_verdict(workload=fresh_quota, deployment=md, now=NOW).park
    assert joint_verdict(workload=_waiting_for(40, 31, pods[0]), deployment=md, now=NOW).park
    assert joint_verdict(workload=_waiting_for(31, 40, pods[0]), deployment=md, now=NOW).park
    assert not joint_verdict(workload=_waiting_for(29, 40, pods[0]), deployment=md, now=NOW).park


def test_parking_deactivates_every_workload_of_the_set_that_holds_or_asks_for_quota() -> None:
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1), pod("decode", 2)]
    stranger = ObservedWorkload(name="wl-stranger", owner_pods=frozenset({"u-other"}))
    workloads = [
        wl(pods[0]),
        wl(pods[1], reserved=False),
        wl(pods[2], active=False),
        wl(pods[3], finished=True),
        stranger,
    ]
    judged = _waiting_for(31, 31, pods[0])
    md = deployment(pods, [judged, *workloads[1:]], roles=(("prefill", 1), ("decode", 3)))
    verdict = joint_verdict(workload=judged, deployment=md, now=NOW)
    assert verdict.park
    assert verdict.deactivate == ("wl-decode-0", "wl-prefill-0")
    assert "wl-decode-0, wl-prefill-0 were deactivated" in verdict.message


def test_the_parking_window_is_the_setting() -> None:
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1]), wl(pods[2], reserved=False)]
    judged = _waiting_for(1.5, 1.5, pods[0])
    md = deployment(pods, workloads)
    assert not joint_verdict(workload=judged, deployment=md, now=NOW).park
    verdict = joint_verdict(workload=judged, deployment=md, now=NOW, park_after=60)
    assert verdict.park and "more than 1 min" in verdict.message
    verdict = joint_verdict(workload=judged, deployment=md, now=NOW, park_after=45)
    assert verdict.park and "more than 45 s" in verdict.message
