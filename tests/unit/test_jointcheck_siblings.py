"""The sibling re-check (docs/contract/controller.md §9): an event on a Workload that lists the
joint check sends every other Workload owning a Pod of the same deployment back to the check;
whose a Pod and a Workload are is kept by the owner index from the events themselves."""

from __future__ import annotations

from typing import Any, cast

from controller_support import MemoryKube

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import Kube
from gpustack_render.reconcile.jointcheck import CHECK_NAME, siblings_to_recheck
from gpustack_render.reconcile.observed import CheckState, ObservedWorkload
from gpustack_render.reconcile.ownerindex import OwnerIndex, controlling_deployment_key

CHECKED = {CHECK_NAME: CheckState("Pending")}


def wl(name: str, *pods: str, checks: dict[str, CheckState] | None = None) -> ObservedWorkload:
    return ObservedWorkload(name=name, owner_pods=frozenset(pods), checks=checks or CHECKED)


def owners() -> OwnerIndex:
    """Deployment ns/a owns Pods a0, a1 (each with its Workload) and a2 (none yet); ns/b owns
    b0; a Workload in another namespace names a Pod of ns/a."""
    index = OwnerIndex()
    for uid, deployment in (("a0", "ns/a"), ("a1", "ns/a"), ("a2", "ns/a"), ("b0", "ns/b")):
        index.pod_changed(uid, deployment)
    index.workload_changed("ns/w-a0", frozenset({"a0"}))
    index.workload_changed("ns/w-a1", frozenset({"a1"}))
    index.workload_changed("ns/w-b0", frozenset({"b0"}))
    index.workload_changed("elsewhere/w-x", frozenset({"a1"}))
    return index


def test_a_workload_with_the_check_sends_its_siblings_back() -> None:
    index = owners()
    assert siblings_to_recheck("ns/w-a0", wl("w-a0", "a0"), index) == ["ns/w-a1"]
    assert siblings_to_recheck("ns/w-b0", wl("w-b0", "b0"), index) == []


def test_without_the_check_nothing_is_sent_back() -> None:
    plain = wl("w-a0", "a0", checks={"other-check": CheckState("Pending")})
    assert siblings_to_recheck("ns/w-a0", plain, owners()) == []


def test_a_workload_of_no_known_pod_has_no_siblings() -> None:
    assert siblings_to_recheck("ns/w-z", wl("w-z", "unknown"), owners()) == []


def test_pods_and_workloads_that_go_take_their_siblings_with_them() -> None:
    index = owners()
    index.workload_changed("ns/w-a2", frozenset({"a2"}))
    assert siblings_to_recheck("ns/w-a0", wl("w-a0", "a0"), index) == ["ns/w-a1", "ns/w-a2"]
    index.pod_deleted("a1")
    assert siblings_to_recheck("ns/w-a0", wl("w-a0", "a0"), index) == ["ns/w-a2"]
    index.workload_deleted("ns/w-a2")
    assert siblings_to_recheck("ns/w-a0", wl("w-a0", "a0"), index) == []
    # A Pod handed to another deployment leaves the first one's set.
    index.pod_changed("a2", "ns/b")
    index.workload_changed("ns/w-a2", frozenset({"a2"}))
    assert siblings_to_recheck("ns/w-b0", wl("w-b0", "b0"), index) == ["ns/w-a2"]


def test_the_index_empties_when_everything_is_deleted() -> None:
    index = owners()
    for key in ("ns/w-a0", "ns/w-a1", "ns/w-b0", "elsewhere/w-x"):
        index.workload_deleted(key)
    for uid in ("a0", "a1", "a2", "b0"):
        index.pod_deleted(uid)
    assert index.size() == 0


def test_the_controlling_deployment_is_read_from_owner_references() -> None:
    pod = {
        "metadata": {
            "namespace": "ns",
            "ownerReferences": [
                {"kind": "ModelDeployment", "name": "other", "controller": False},
                {"kind": "ModelDeployment", "name": "a", "controller": True},
            ],
        }
    }
    assert controlling_deployment_key(pod) == "ns/a"
    assert controlling_deployment_key({"metadata": {"namespace": "ns"}}) is None


# ---- the controller's handlers -------------------------------------------------------------------


def _pod(name: str, deployment: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "ownerReferences": [
                {
                    "apiVersion": "worker.gpustack.ai/v1",
                    "kind": "ModelDeployment",
                    "name": deployment,
                    "uid": f"uid-{deployment}",
                    "controller": True,
                }
            ],
        },
    }


def _workload(name: str, pod: str, *, checked: bool = True) -> dict[str, Any]:
    checks = [{"name": CHECK_NAME, "state": "Pending"}] if checked else []
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": f"uid-{pod}"}
            ],
        },
        "status": {"admissionChecks": checks},
    }


def _keys(controller: Controller, queue: str) -> set[str]:
    return set(cast(set[str], getattr(controller, queue)._queued))


def test_the_controller_enqueues_the_owner_and_rechecks_the_siblings() -> None:
    controller = Controller(cast(Kube, MemoryKube()), Options())
    for pod in (_pod("p0", "a"), _pod("p1", "a"), _pod("q0", "b")):
        controller._on_owned("ADDED", pod, None)
    assert _keys(controller, "queue") == {"ns/a", "ns/b"}
    controller._on_workload("ADDED", _workload("w1", "p1", checked=False), None)
    controller._on_workload("ADDED", _workload("wq", "q0"), None)
    controller.check_queue = type(controller.check_queue)("jointcheck")
    controller._on_workload("MODIFIED", _workload("w0", "p0"), None)
    assert _keys(controller, "check_queue") == {"ns/w0", "ns/w1"}
    # A deleted Pod no longer makes its Workload a sibling.
    controller.check_queue = type(controller.check_queue)("jointcheck")
    controller._on_owned("DELETED", _pod("p1", "a"), None)
    controller._on_workload("MODIFIED", _workload("w0", "p0"), None)
    assert _keys(controller, "check_queue") == {"ns/w0"}
