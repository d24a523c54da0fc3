"""“Admitted” means admitted now: ``Admitted=True``, no ``Evicted=True``, no
``deletionTimestamp`` (docs/contract/controller.md §8). Kueue keeps ``Admitted=True`` on an
evicted Workload until its Pods stopped, and keeps a deleted Workload until its group stopped;
neither opens the cadence gate, resolves a remembered replacement or counts as admitted in
status. Workloads here are read from raw objects, as the controller reads them."""

from __future__ import annotations

from typing import Any

import pytest
from test_rollout_planner import Case, pod, role
from test_status_conditions import compute, condition, deployment, message, pods_of, rendered

from gpustack_render.reconcile.conditions import common as cond
from gpustack_render.reconcile.jointcheck import CHECK_NAME, needs_verdict
from gpustack_render.reconcile.observed import ObservedPod, ObservedWorkload, observe_workload

ADMITTED = [
    {"type": "QuotaReserved", "status": "True"},
    {"type": "Admitted", "status": "True"},
]
EVICTED = [*ADMITTED, {"type": "Evicted", "status": "True", "reason": "Preempted"}]


def raw(*pods: ObservedPod, conditions: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"wl-{pods[0].uid}",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": p.name, "uid": p.uid} for p in pods
            ],
            **meta,
        },
        "spec": {"active": True},
        "status": {"conditions": conditions, "admissionChecks": [{"name": CHECK_NAME}]},
    }


def read(*pods: ObservedPod, conditions: list[dict[str, Any]], **meta: Any) -> ObservedWorkload:
    return observe_workload(raw(*pods, conditions=conditions, **meta))


DELETING = {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["kueue.x-k8s.io/x"]}
NOT_NOW = [
    pytest.param({"conditions": EVICTED}, id="evicted"),
    pytest.param({"conditions": ADMITTED, **DELETING}, id="deleting"),
]


@pytest.mark.parametrize("how", NOT_NOW)
def test_an_evicted_or_deleting_workload_reads_not_admitted(how: dict[str, Any]) -> None:
    p = pod(0)
    assert read(p, conditions=ADMITTED).admitted
    wl = read(p, **how)
    assert not wl.admitted and wl.ever_admitted
    assert wl.deleting == ("deletionTimestamp" in how)


@pytest.mark.parametrize("how", NOT_NOW)
def test_the_cadence_gate_stays_closed(how: dict[str, Any]) -> None:
    pods = [pod(0, config="old"), pod(1, config="old")]
    workloads = [read(pods[0], conditions=ADMITTED), read(pods[1], **how)]
    result = Case((role(),), pods, workloads).run()
    assert not result.delete_pods
    step = result.role("server")
    assert step is not None and step.held_by_admission


@pytest.mark.parametrize("how", NOT_NOW)
def test_a_remembered_replacement_does_not_resolve(how: dict[str, Any]) -> None:
    pods = [pod(0, config="old"), pod(1)]
    workloads = [read(pods[0], conditions=ADMITTED), read(pods[1], **how)]
    result = Case((role(),), pods, workloads, {"server": 1}).run()
    assert not result.delete_pods
    assert result.replacing == {"server": 1} and result.requeue


def test_status_counts_an_evicted_replica_as_not_admitted() -> None:
    md = deployment()
    rendering = rendered(md)
    pods = pods_of(rendering)
    workloads = [read(pods[0], conditions=EVICTED), read(pods[1], conditions=ADMITTED)]
    status = compute(md, rendering, pods, workloads)
    assert condition(status, cond.QUOTA_RESERVED) == ("False", "PreemptedInPart")
    assert message(status, cond.QUOTA_RESERVED).startswith("1 of 2 replicas are admitted")


def test_the_joint_check_leaves_a_deleting_workload_alone() -> None:
    p = pod(0)
    reserved = [{"type": "QuotaReserved", "status": "True"}]
    assert needs_verdict(read(p, conditions=reserved))
    assert not needs_verdict(read(p, conditions=reserved, **DELETING))
