"""The joint check judges a single-role deployment's Workload from the caches: with the Workload,
its owner Pod and the deployment cached, the verdict ``Ready`` is applied without a live read
(two round trips before Kueue may admit the group otherwise); anything not cached falls back to
the live reads."""

from __future__ import annotations

from typing import Any, cast

from controller_support import MemoryKube

from gpustack_controller.admissioncheck import AdmissionCheckReconciler
from gpustack_controller.kube import MODEL_DEPLOYMENTS, PODS, WORKLOADS, Kube, Resource
from gpustack_controller.watches import Informer
from gpustack_render.reconcile.jointcheck import CHECK_NAME

WHEN = "2026-12-07T11:00:00Z"


def _workload() -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": "w",
            "namespace": "ns",
            "uid": "wuid",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "puid"}],
        },
        "spec": {"active": True},
        "status": {
            "conditions": [{"type": "QuotaReserved", "status": "True", "lastTransitionTime": WHEN}],
            "admissionChecks": [
                {"name": CHECK_NAME, "state": "Pending", "lastTransitionTime": WHEN, "message": ""}
            ],
        },
    }


def _pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "puid",
            "ownerReferences": [
                {
                    "apiVersion": "worker.gpustack.ai/v1",
                    "kind": "ModelDeployment",
                    "name": "md",
                    "uid": "mduid",
                    "controller": True,
                }
            ],
        },
    }


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "md", "namespace": "ns", "uid": "mduid", "generation": 1},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [
                {
                    "name": "server",
                    "replicas": 2,
                    "instanceType": "gpustack-nvidia-h100",
                    "resources": {"accelerator": 1},
                }
            ],
        },
    }


def _informer(resource: Resource, *objects: dict[str, Any]) -> Informer:
    informer = Informer(cast(Kube, None), resource)
    informer.cache = {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o for o in objects}
    informer.synced.set()
    informer.current = True
    return informer


class CountingKube(MemoryKube):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    async def get(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        self.reads.append(f"{resource.kind}/{name}")
        return await super().get(resource, name, namespace)


def _kube() -> CountingKube:
    kube = CountingKube()
    for obj in (_workload(), _pod(), _deployment()):
        kube.put(obj)
    return kube


def _state(kube: MemoryKube) -> str:
    stored = kube.stored("Workload", "ns", "w")
    assert stored is not None
    return str(stored["status"]["admissionChecks"][0]["state"])


async def test_a_single_role_workload_is_judged_from_the_caches_without_a_read() -> None:
    kube = _kube()
    checker = AdmissionCheckReconciler(
        cast(Kube, kube),
        _informer(PODS, _pod()),
        workloads=_informer(WORKLOADS, _workload()),
        deployments=_informer(MODEL_DEPLOYMENTS, _deployment()),
    )
    assert await checker("ns/w") is None
    assert _state(kube) == "Ready"
    assert kube.reads == []
    assert checker.cached_verdicts == 1


async def test_a_deployment_not_cached_is_read_live() -> None:
    kube = _kube()
    checker = AdmissionCheckReconciler(
        cast(Kube, kube),
        _informer(PODS, _pod()),
        workloads=_informer(WORKLOADS, _workload()),
        deployments=_informer(MODEL_DEPLOYMENTS),
    )
    assert await checker("ns/w") is None
    assert _state(kube) == "Ready"
    assert kube.reads == ["Workload/w", "ModelDeployment/md"]
    assert checker.cached_verdicts == 0


async def test_a_replaced_deployment_is_read_live() -> None:
    """A cached deployment of another uid is not the Pod's owner: the live path decides."""
    kube = _kube()
    other = _deployment()
    other["metadata"]["uid"] = "another"
    checker = AdmissionCheckReconciler(
        cast(Kube, kube),
        _informer(PODS, _pod()),
        workloads=_informer(WORKLOADS, _workload()),
        deployments=_informer(MODEL_DEPLOYMENTS, other),
    )
    await checker("ns/w")
    assert checker.cached_verdicts == 0
    assert "Workload/w" in kube.reads
