"""Reading observed Pods and Kueue Workloads into the planner's values (``observed.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_render.core import labels
from gpustack_render.core.ownerrefs import controlled_by
from gpustack_render.reconcile.observed import observe_pod, observe_workload

OWNER = "md-uid"


def pod_object(**meta: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "metadata": {
            "name": "qwen-server-abcde",
            "uid": "pod-uid",
            "labels": {
                labels.COMPONENT: "server",
                labels.POD_ORDINAL: "2",
                labels.MEMBER_INDEX: "1",
                labels.POD_GROUP_NAME: "gpustack-fnv64-0000000000000001",
            },
            "annotations": {
                labels.POD_SPEC_HASH: "abc",
                labels.RENDER_VERSION: "1",
                labels.POD_GROUP_TOTAL_COUNT: "2",
                labels.PROMETHEUS_SCRAPE: "true",
            },
            "ownerReferences": [
                {
                    "apiVersion": "worker.gpustack.ai/v1",
                    "kind": "ModelDeployment",
                    "name": "qwen",
                    "uid": OWNER,
                    "controller": True,
                }
            ],
        },
        "spec": {"nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"restartCount": 2}, {"restartCount": 1}],
        },
    }
    base["metadata"].update(meta)
    return base


def test_a_rendered_pod_reads_back_its_seat_and_currency() -> None:
    pod = observe_pod(pod_object(), owner_uid=OWNER)
    assert (pod.role, pod.ordinal, pod.member) == ("server", 2, 1)
    assert pod.group == "gpustack-fnv64-0000000000000001"
    assert (pod.pod_spec_hash, pod.render_version, pod.group_total) == ("abc", 1, 2)
    assert pod.ready and pod.phase == "Running" and not pod.terminating
    assert pod.restarts == 3 and pod.node_name == "node-1"
    assert pod.owned and not pod.takeover and not pod.gated


@pytest.mark.parametrize(
    ("edit", "field", "value"),
    [
        pytest.param({"labels": {}}, "ordinal", None, id="no-ordinal-is-orphan"),
        pytest.param({"labels": {labels.POD_ORDINAL: "x1"}}, "ordinal", None, id="bad-ordinal"),
        pytest.param({"labels": {labels.POD_ORDINAL: "0"}}, "member", 0, id="missing-member-0"),
        pytest.param({"annotations": {}}, "render_version", 0, id="no-render-version"),
        pytest.param({"annotations": {}}, "takeover", True, id="no-scrape-is-take-over"),
        pytest.param(
            {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "terminating", True, id="terminating"
        ),
        pytest.param({"ownerReferences": []}, "owned", False, id="labels-never-adopt"),
    ],
)
def test_lenient_readings(edit: dict[str, Any], field: str, value: object) -> None:
    assert getattr(observe_pod(pod_object(**edit), owner_uid=OWNER), field) == value


def test_gates_eviction_and_failure() -> None:
    obj = pod_object()
    obj["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    obj["status"] = {"phase": "Failed", "reason": "Evicted"}
    pod = observe_pod(obj, owner_uid=OWNER)
    assert pod.gated and pod.failed and pod.evicted and not pod.ready


def test_why_a_pod_does_not_run_is_read_back() -> None:
    obj = pod_object()
    obj["spec"]["schedulingGates"] = [
        {"name": "kueue.x-k8s.io/admission"},
        {"name": "example.com/topology"},
        {"nameless": True},
    ]
    obj["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3",
            },
        ],
        "containerStatuses": [
            {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "restartCount": 4},
            {"state": {"running": {}}},
        ],
    }
    pod = observe_pod(obj, owner_uid=OWNER)
    assert pod.scheduling_gates == ("kueue.x-k8s.io/admission", "example.com/topology")
    assert (pod.unscheduled_reason, pod.unscheduled_message) == ("Unschedulable", "0/3")
    assert pod.waiting_reasons == ("CrashLoopBackOff",) and pod.restarts == 4
    assert pod.gated and not pod.ready


def test_ownership_needs_a_controller_reference_to_the_uid() -> None:
    obj = pod_object()
    assert controlled_by(obj, OWNER)
    obj["metadata"]["ownerReferences"][0]["controller"] = False
    assert not controlled_by(obj, OWNER)
    assert not controlled_by(pod_object(), "other")


def workload(conditions: list[dict[str, Any]], **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "gpustack-fnv64-0000000000000001",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "u1"},
                {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "u2"},
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "c", "uid": "u3"},
            ],
        },
        "spec": {"queueName": "q", "active": True},
        "status": {"conditions": conditions, **status},
    }


@pytest.mark.parametrize(
    ("conditions", "extra", "expected"),
    [
        pytest.param(
            [], {}, dict(quota_reserved=False, admitted=False, ever_admitted=False), id="new"
        ),
        pytest.param(
            [{"type": "QuotaReserved", "status": "True"}],
            {},
            dict(quota_reserved=True, admitted=False, ever_admitted=False),
            id="reserved",
        ),
        pytest.param(
            [{"type": "QuotaReserved", "status": "True"}, {"type": "Admitted", "status": "True"}],
            {},
            dict(admitted=True, ever_admitted=True, preempted=False),
            id="admitted",
        ),
        pytest.param(
            [
                {"type": "Admitted", "status": "False"},
                {"type": "Evicted", "status": "True", "reason": "Preempted"},
            ],
            {},
            dict(admitted=False, ever_admitted=True, preempted=True, evicted=True),
            id="preempted-by-eviction-reason",
        ),
        pytest.param(
            [{"type": "Preempted", "status": "True"}],
            {},
            dict(preempted=True, ever_admitted=True),
            id="preempted-condition",
        ),
        pytest.param(
            [], {"requeueState": {"count": 1}}, dict(ever_admitted=True), id="requeued-before"
        ),
        pytest.param(
            # Kueue with waitForPodsReady writes this on a Workload it never admitted.
            [
                {"type": "PodsReady", "status": "False", "reason": "WaitForStart"},
                {"type": "QuotaReserved", "status": "False", "reason": "Inadmissible"},
            ],
            {},
            dict(quota_reserved=False, admitted=False, ever_admitted=False),
            id="waiting-for-start-is-not-admitted",
        ),
        pytest.param(
            [{"type": "Finished", "status": "True"}], {}, dict(finished=True), id="finished"
        ),
    ],
)
def test_workload_readings(
    conditions: list[dict[str, Any]], extra: dict[str, Any], expected: dict[str, bool]
) -> None:
    wl = observe_workload(workload(conditions, **extra))
    assert wl.owner_pods == frozenset({"u1", "u2"})
    assert wl.queue == "q" and wl.active
    for field, value in expected.items():
        assert getattr(wl, field) == value, field


def test_workload_checks_flavors_and_activity() -> None:
    obj = workload(
        [],
        admissionChecks=[
            {
                "name": "gpustack-model-deployment-joint",
                "state": "Pending",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ],
        admission={
            "podSetAssignments": [
                {"name": "server", "flavors": {"nvidia.com/gpu": "a10g", "cpu": "default"}}
            ]
        },
    )
    obj["spec"]["active"] = False
    wl = observe_workload(obj)
    check = wl.checks["gpustack-model-deployment-joint"]
    assert (check.state, check.message, check.last_transition_time) == (
        "Pending",
        "m",
        "2026-01-01T00:00:00Z",
    )
    assert wl.flavors == {"server": ("a10g", "default")}
    assert not wl.active


def test_why_kueue_holds_a_workload_is_read_back() -> None:
    queued = observe_workload(
        workload(
            [
                {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": "m"},
            ]
        )
    )
    assert (queued.quota_reason, queued.quota_message) == ("Pending", "m")
    assert (queued.admitted_reason, queued.admitted_message) == ("", "")
    evicted = observe_workload(
        workload(
            [
                {"type": "QuotaReserved", "status": "True"},
                {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "a"},
                {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "e"},
            ]
        )
    )
    assert (evicted.quota_reason, evicted.quota_message) == ("", "")
    assert (evicted.admitted_reason, evicted.admitted_message) == ("NoReservation", "a")
    assert (evicted.evicted_reason, evicted.evicted_message) == ("Preempted", "e")
