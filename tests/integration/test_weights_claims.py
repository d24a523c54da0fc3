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

#: The KWOK Node the static volumes live on.
NODE = "gpu-node-3"


def _class(name: str) -> dict[str, Any]:
    """A class without a provisioner: only a static volume binds its claims, and at once."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "Immediate",
    }


def _volume(name: str, cls: str, modes: list[str]) -> dict[str, Any]:
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
                                    "values": [NODE],
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
    await kube.create(PERSISTENT_VOLUMES, _volume(pv, cls, ["ReadOnlyMany"]))
    await kube.create(PERSISTENT_VOLUME_CLAIMS, _claim("weights", ns, cls, ["ReadOnlyMany"]), ns)
    await kube.create(MODEL_ARTIFACTS, _artifact("qwen", ns, "weights"), ns)

    async def bound() -> bool:
        claim = await kube.get(PERSISTENT_VOLUME_CLAIMS, "weights", ns)
        return claim is not None and (claim.get("status") or {}).get("phase") == "Bound"

    async with running_controller(cluster.kubeconfig):
        await eventually(bound, what="the PV binder binds the claim")
        md = _named(deployment("chat", ns, role(replicas=2)), "qwen")
        await kube.create(MODEL_DEPLOYMENTS, md, ns)
        mounted = await eventually(
            lambda: _reason(kube, ns, "chat", "Mounted"),
            timeout=60,
            what="WeightsReady=True Mounted",
        )
        assert mounted["status"] == "True"
        pods = live(await pods_of(kube, ns, "chat"))
        assert len(pods) == 2
        for pod in pods:
            assert pod["spec"]["nodeName"] == NODE  # placed by the real scheduler
            terms = pod["spec"]["affinity"]["nodeAffinity"][
                "requiredDuringSchedulingIgnoredDuringExecution"
            ]["nodeSelectorTerms"]
            assert any(
                NODE in e.get("values", []) for t in terms for e in t.get("matchExpressions", [])
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
    await kube.create(PERSISTENT_VOLUMES, _volume(pv, cls, ["ReadWriteOnce"]))
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
