"""Weights from a claim on the simulated cluster (docs/weights.md): the real PV binder of
kube-controller-manager binds the claims, the controller resolves the claim artifact and copies
the bound volume's node affinity into its Pods, the real scheduler places them on that KWOK
node, and KWOK's ready stage reports the volumes mounted (``WeightsReady=True Mounted``). A
claim nothing will bind (``ClaimNotBound``) and a single-Pod claim two Pods would share
(``AccessModeConflict``) create no Pod, with real claims."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_controller.kube import (
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    STORAGE_CLASSES,
    Kube,
)

from .cluster import Cluster
from .controller_fixtures import (
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_namespace,
    pods_of,
    role,
    running_controller,
    steady,
    tear_down,
    unique,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: The KWOK Nodes of the shared cluster (tests/integration/cluster.py default_nodes).
NODES = tuple(f"gpu-node-{i}" for i in range(8))


async def _freest_node(kube: Kube) -> str:
    """The Node with the most GPUs no live Pod requests: the static volume goes there, so the
    test does not wait on room another test's Pods hold."""
    items, _ = await kube.list(PODS, None)
    used = dict.fromkeys(NODES, 0)
    for pod in items:
        node = pod["spec"].get("nodeName")
        if node in used and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in pod["spec"]["containers"]:
                limits = (c.get("resources") or {}).get("limits") or {}
                used[node] += int(limits.get("nvidia.com/gpu", 0))
    return min(NODES, key=lambda n: (used[n], n))


def _class(name: str) -> dict[str, Any]:
    """A class without a provisioner: only a static volume binds its claims, and at once."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
    }


def _volume(name: str, cls: str, modes: list[str], node: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": modes,
            "storageClassName": cls,
            "local": {"path": "/var/lib/models"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def _claim(name: str, namespace: str, cls: str, modes: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": modes,
            "storageClassName": cls,
            "resources": {"requests": {"storage": "10Gi"}},
        },
    }


def _artifact(name: str, namespace: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"source": {"persistentVolumeClaim": {"claimName": claim, "path": "qwen3-8b"}}},
    }


def _named(md: dict[str, Any], artifact: str) -> dict[str, Any]:
    md["spec"]["model"]["artifactRef"] = {"name": artifact}
    return md


async def _weights(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    md = await get_md(kube, namespace, name)
    return condition(md, "WeightsReady") if md is not None else None


async def _reason(kube: Kube, namespace: str, name: str, reason: str) -> dict[str, Any] | None:
    found = await _weights(kube, namespace, name)
    return found if found is not None and found.get("reason") == reason else None


async def test_a_bound_claim_places_the_pods_on_its_node(kube: Kube, cluster: Cluster) -> None:
    await ensure_instance_type(kube)
    ns = await new_namespace(kube, "wclaim")
    cls, pv = unique("models"), unique("pv")
    await kube.create(STORAGE_CLASSES, _class(cls))
    node = await _freest_node(kube)
    await kube.create(PERSISTENT_VOLUMES, _volume(pv, cls, ["ReadOnlyMany"], node))
    await kube.create(PERSISTENT_VOLUME_CLAIMS, _claim("weights", ns, cls, ["ReadOnlyMany"]), ns)
    await kube.create(MODEL_ARTIFACTS, _artifact("qwen", ns, "weights"), ns)

    async def bound() -> bool:
        claim = await kube.get(PERSISTENT_VOLUME_CLAIMS, "weights", ns)
        return claim is not None and (claim.get("status") or {}).get("phase") == "Bound"

    async with running_controller(cluster.kubeconfig):
        await eventually(bound, what="the PV binder binds the claim")
        md = _named(deployment("chat", ns, role(replicas=2)), "qwen")
        await kube.create(MODEL_DEPLOYMENTS, md, ns)
        try:
            mounted = await eventually(
                lambda: _reason(kube, ns, "chat", "Mounted"),
                timeout=90,
                what="WeightsReady=True Mounted",
            )
        except AssertionError as exc:
            seen = [
                (p["metadata"]["name"], p["spec"].get("nodeName"), p["status"].get("phase"))
                for p in await pods_of(kube, ns, "chat")
            ]
            said = await _weights(kube, ns, "chat")
            raise AssertionError(f"{exc}; WeightsReady {said}; {seen}") from exc
        assert mounted["status"] == "True"
        pods = live(await pods_of(kube, ns, "chat"))
        assert len(pods) == 2
        for pod in pods:
            assert pod["spec"]["nodeName"] == node  # placed by the real scheduler
            terms = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            assert any(
                node in e.get("values", []) for t in terms for e in t.get("matchExpressions", [])
            )
            volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "gpustack-model")
            assert volume["persistentVolumeClaim"] == {"claimName": "weights", "readOnly": True}
            main = next(c for c in pod["spec"]["containers"] if c["name"] == "main")
            mount = next(m for m in main["volumeMounts"] if m["name"] == "gpustack-model")
            assert mount["subPath"] == "qwen3-8b" and mount["readOnly"] is True
        stored = await get_md(kube, ns, "chat")
        assert stored is not None
        assert stored["status"]["model"] == {"artifact": "qwen", "delivery": "PVC"}
        await tear_down(kube, ns, "chat")


async def test_claims_that_cannot_serve_create_no_pod(kube: Kube, cluster: Cluster) -> None:
    await ensure_instance_type(kube)
    ns = await new_namespace(kube, "wblock")
    cls, pv = unique("models"), unique("pv")
    await kube.create(STORAGE_CLASSES, _class(cls))
    # A single-writer volume bound to its claim, and a claim of the same class with no volume.
    await kube.create(PERSISTENT_VOLUMES, _volume(pv, cls, ["ReadWriteOnce"], NODES[0]))
    await kube.create(PERSISTENT_VOLUME_CLAIMS, _claim("rwo", ns, cls, ["ReadWriteOnce"]), ns)
    await kube.create(PERSISTENT_VOLUME_CLAIMS, _claim("unbound", ns, cls, ["ReadOnlyMany"]), ns)
    await kube.create(MODEL_ARTIFACTS, _artifact("single", ns, "rwo"), ns)
    await kube.create(MODEL_ARTIFACTS, _artifact("nowhere", ns, "unbound"), ns)

    async with running_controller(cluster.kubeconfig):
        await kube.create(
            MODEL_DEPLOYMENTS, _named(deployment("shared", ns, role(replicas=2)), "single"), ns
        )
        await kube.create(MODEL_DEPLOYMENTS, _named(deployment("waits", ns, role()), "nowhere"), ns)
        conflict = await eventually(
            lambda: _reason(kube, ns, "shared", "AccessModeConflict"),
            timeout=60,
            what="AccessModeConflict",
        )
        assert conflict["status"] == "False" and "ReadOnlyMany" in conflict["message"]
        unbound = await eventually(
            lambda: _reason(kube, ns, "waits", "ClaimNotBound"),
            timeout=60,
            what="ClaimNotBound",
        )
        assert "spec.volumeName" in unbound["message"]

        async def no_pods() -> bool:
            return not await pods_of(kube, ns, "shared") and not await pods_of(kube, ns, "waits")

        await steady(no_pods, seconds=2.0, what="no Pod is created while the claims block")
        await tear_down(kube, ns, "shared", "waits")
