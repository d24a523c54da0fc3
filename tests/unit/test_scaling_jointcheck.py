"""The joint admission check with autoscaled roles (D27, ``reconcile/admissionsets.py``): a unit of
a ratio group is admitted with the base set, never waiting for the other units; the base set is
what it always was; parking a unit deactivates only that unit's Workloads; and the scaler's
status counts a unit as admitted (ready) only when every replica of it is."""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from admission_support import default_objects, pd, role
from scaling_support import pod

from gpustack_render.core.settings import Settings
from gpustack_render.deployment.scaling import ScaleTarget
from gpustack_render.reconcile.admissionsets import admission_sets
from gpustack_render.reconcile.jointcheck import (
    CHECK_NAME,
    JointDeployment,
    joint_deployment,
    joint_verdict,
)
from gpustack_render.reconcile.observed import CheckState, ObservedPod, ObservedWorkload
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.scalerstatus import scaler_status
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
PD = ScaleTarget("pd", True, (("prefill", 1), ("decode", 2)), 0, 8)


def wl(p: ObservedPod, *, reserved: bool = True, **kw: object) -> ObservedWorkload:
    return replace(
        ObservedWorkload(
            name=f"wl-{p.name}",
            owner_pods=frozenset({p.uid}),
            quota_reserved=reserved,
            admitted=reserved,
            ever_admitted=reserved,
            active=True,
            checks={CHECK_NAME: CheckState("Ready" if reserved else "Pending")},
        ),
        **kw,  # type: ignore[arg-type]
    )


def units(n: int) -> list[ObservedPod]:
    return [pod("prefill", u) for u in range(n)] + [pod("decode", o) for o in range(2 * n)]


def grouped(pods: list[ObservedPod], workloads: list[ObservedWorkload]) -> JointDeployment:
    counts = (("prefill", 3), ("decode", 6))
    return JointDeployment("qwen", counts, pods, workloads, sets=admission_sets(counts, (PD,)))


def test_the_sets_are_the_base_plus_a_whole_unit() -> None:
    sets = admission_sets((("prefill", 3), ("decode", 6)), (PD,))
    assert sets.base() == [("prefill", 0), ("decode", 0), ("decode", 1)]
    assert sets.judged_with("decode", 5) == [
        ("prefill", 0),
        ("prefill", 2),
        ("decode", 0),
        ("decode", 1),
        ("decode", 4),
        ("decode", 5),
    ]
    assert sets.judged_with("prefill", 0) == sets.base()
    plain = admission_sets((("prefill", 1), ("decode", 2)))
    assert plain.judged_with("decode", 1) == [("prefill", 0), ("decode", 0), ("decode", 1)]


def test_a_unit_is_admitted_once_it_is_whole_whatever_the_other_units_do() -> None:
    """Units 0 and 1 hold quota, unit 2 cannot get any: unit 1's last Workload is Ready (it
    does not wait for unit 2), unit 2's waits."""
    pods = units(3)
    by = {p.name: p for p in pods}
    waiting = {"prefill-2", "decode-4"}
    workloads = [
        wl(
            p,
            reserved=p.name not in waiting,
            admitted=p.name not in waiting and p.name != "decode-3",
        )
        for p in pods
    ]
    judged = next(w for w in workloads if w.name == "wl-decode-3")
    judged = replace(judged, checks={CHECK_NAME: CheckState("Pending")})
    verdict = joint_verdict(workload=judged, deployment=grouped(pods, workloads), now=NOW)
    assert verdict.state == "Ready", verdict.message
    assert "unit 1 of scaling group pd" in verdict.message

    half = next(w for w in workloads if w.name == "wl-decode-5")
    verdict = joint_verdict(workload=half, deployment=grouped(pods, workloads), now=NOW)
    assert verdict.state == "Pending"
    assert "4 of 6 replicas reserved quota" in verdict.message
    assert "unit 2 of scaling group pd is admitted with the base set only" in verdict.message
    assert by["decode-5"].ordinal == 5


def test_parking_a_unit_deactivates_only_that_units_workloads() -> None:
    pods = units(2)
    since = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    workloads = [wl(p, reserved=p.name != "decode-3") for p in pods]
    judged = next(w for w in workloads if w.name == "wl-decode-2")
    judged = replace(
        judged,
        admitted=False,
        quota_reserved_since=since,
        checks={CHECK_NAME: CheckState("Pending", last_transition_time=since)},
    )
    workloads = [judged if w.name == judged.name else w for w in workloads]
    verdict = joint_verdict(
        workload=judged, deployment=grouped(pods, workloads), now=NOW, park_after=60
    )
    assert verdict.park
    # Unit 1 is prefill-1, decode-2 and decode-3; the admitted prefill-1 serves on.
    assert verdict.deactivate == ("wl-decode-2", "wl-decode-3")


def test_the_base_set_is_judged_as_before() -> None:
    """Without autoscaling every replica is judged together (the seed's all or nothing)."""
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1)]
    workloads = [wl(pods[0]), wl(pods[1]), wl(pods[2], reserved=False)]
    plain = JointDeployment("qwen", (("prefill", 1), ("decode", 2)), pods, workloads)
    verdict = joint_verdict(workload=workloads[0], deployment=plain, now=NOW)
    assert verdict.state == "Pending" and "2 of 3" in verdict.message


def test_an_external_roles_extra_replica_waits_only_for_the_base() -> None:
    """decode is External alone: decode-2 is admitted with the base (every prefill replica and
    decode-0), whatever decode-1 does."""
    target = ScaleTarget("decode", False, (("decode", 1),), 1, 8)
    counts = (("prefill", 1), ("decode", 3))
    pods = [pod("prefill", 0), pod("decode", 0), pod("decode", 1), pod("decode", 2)]
    workloads = [wl(p, reserved=p.name != "decode-1") for p in pods]
    dep = JointDeployment("qwen", counts, pods, workloads, sets=admission_sets(counts, (target,)))
    verdict = joint_verdict(workload=workloads[3], deployment=dep, now=NOW)
    assert verdict.state == "Ready"
    assert "replica 2 of role decode" in verdict.message


def _pd_group(status: dict[str, Any] | None = None) -> Any:
    obj = pd(
        roles=[role("prefill", kind="Prefill"), role("decode", kind="Decode", replicas=2)],
        scalingGroups=[
            {
                "name": "pd",
                "roles": [{"name": "prefill", "perUnit": 1}, {"name": "decode", "perUnit": 2}],
            }
        ],
    )
    obj = copy.deepcopy(obj)
    obj["metadata"]["uid"] = "md-uid"
    if status is not None:
        obj["status"] = status
    md, errs = decode_deployment(obj)
    assert md is not None, errs
    return md


def test_the_check_reads_the_groups_from_the_stored_deployment() -> None:
    status = {
        "roles": [
            {"name": "prefill", "desired": 3, "scaling": {"source": "Scaler", "scaler": "qwen-pd"}},
            {"name": "decode", "desired": 6, "scaling": {"source": "Scaler", "scaler": "qwen-pd"}},
        ]
    }
    dep = joint_deployment(_pd_group(status), pods=[], workloads=[])
    assert dep.roles == (("prefill", 3), ("decode", 6))
    assert dep.admission_sets().judged_with("decode", 4)[-2:] == [("decode", 4), ("decode", 5)]


def test_the_scaler_counts_a_unit_only_when_every_replica_of_it_is() -> None:
    md = _pd_group()
    rendering = render(
        md,
        lookups=StaticLookups.of(default_objects()),
        settings=Settings(),
        counts={"prefill": 3, "decode": 6},
    )
    pods = [p for p in units(3) if p.name != "decode-5"]  # unit 2 lacks a decoder
    pods = [replace(p, ready=p.name != "decode-2") for p in pods]  # unit 1 not all Ready
    waiting = {"prefill-2", "decode-4"}
    workloads = [
        wl(
            p,
            reserved=p.name not in waiting,
            quota_message="couldn't assign flavors to pod set decode: insufficient unused quota "
            "for nvidia.com/gpu in flavor default-flavor, 1 more needed"
            if p.name in waiting
            else "",
        )
        for p in pods
    ]
    (target,) = (PD,)
    status = scaler_status(
        target,
        deployment="qwen",
        units=3,
        rendering=rendering,
        index=ReplicaIndex.of(pods, workloads),
        previous=None,
        generation=4,
        now="2026-01-01T12:00:00Z",
    )
    assert (status.desired, status.ready, status.replicas) == (3, 1, 1)
    assert (status.admitted, status.quota_pending) == (2, 1)
    assert status.conditions is not None
    (cond,) = status.conditions
    assert (cond.type, cond.status, cond.reason) == ("QuotaReserved", "False", "QuotaPending")
    assert "1 unit(s) of scaling group pd of 3 wait for quota" in cond.message
    assert "ClusterQueue gpustack-fnv64-0123456789abcdef cannot hold 2 replica(s)" in cond.message
    assert "it lacks nvidia.com/gpu in flavor default-flavor" in cond.message
    assert status.observed_generation == 4
