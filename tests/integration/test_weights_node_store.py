"""Node delivery on the simulated cluster (docs/node-store.md, "The controller's side"): an
artifact resolved against the local test hub (tests/support/hubserver.py), the Setting
``model-artifact-delivery-mode: Node``, the real scheduler, Kueue and KWOK Nodes.

- Without the ``CSIDriver`` ``model.csi.gpustack.ai`` no Pod is created
  (``NodeDeliveryUnavailable``); once it exists the Pod is created and, KWOK's ready stage
  reporting its volumes mounted, ``WeightsReady`` is ``Mounted``.
- ``NodeModelStore`` records, written here exactly as the node plugin writes them (the object
  named after the node, created, then its status applied through the status subresource), feed
  the artifact's ``status.nodes``.
- The real scheduler places a replacement on the node holding the digest: the record says
  another node than the first Pod's holds it ``Ready``; the first Pod is deleted and its
  replacement lands on that node, with the same pod-spec-hash (the preference is outside it,
  so the running Pod was not rolled when the record appeared).

``Materializing``/``MaterializationFailed`` need a Pod whose volumes are not mounted, which
KWOK's ready stage never leaves long enough to observe: they are proven by the unit tests
(tests/unit/test_weights_nodes.py) from the same Pod facts.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from support.hubserver import HubServer

from gpustack_controller.kube import (
    CSI_DRIVERS,
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    NODE_MODEL_STORES,
    PODS,
    Kube,
)
from gpustack_render.core.labels import POD_SPEC_HASH
from gpustack_render.schema.resources import NODES as NODES_RESOURCE
from gpustack_render.weights.delivery import CSI_DRIVER

from .cluster import Cluster, FakeNode
from .controller_fixtures import (
    condition,
    deployment,
    eventually,
    get_md,
    live,
    node_delivery_setup,
    pods_of,
    running_controller,
    tear_down,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: The KWOK Nodes of the shared cluster (tests/integration/cluster.py default_nodes).
#: The test's own three simulated nodes (a worker label of their own, which only its flavor
#: selects), so the placement it checks does not depend on cards other tests' Pods still hold.
RUN = uuid.uuid4().hex[:6]
NODES = tuple(f"nms-{RUN}-{i}" for i in range(3))
WORKER_LABEL = f"nms-{RUN}"
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama"}\n',
    "model.safetensors": (b"\x07" * 8192, True),
}


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[HubServer]:
    server = HubServer()
    server.repo("org/node-model").add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _artifact(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name},
        "spec": {"source": {"huggingFace": {"repository": "org/node-model", "revision": "main"}}},
    }


async def _write_store(kube: Kube, node: str, models: list[dict[str, Any]]) -> None:
    """The record of ``node`` as the node plugin writes it: created when absent, its status
    applied through the status subresource."""
    if await kube.get(NODE_MODEL_STORES, node) is None:
        await kube.create(
            NODE_MODEL_STORES,
            {
                "apiVersion": NODE_MODEL_STORES.api_version,
                "kind": "NodeModelStore",
                "metadata": {"name": node},
            },
        )
    await kube.apply(
        NODE_MODEL_STORES,
        {
            "apiVersion": NODE_MODEL_STORES.api_version,
            "kind": "NodeModelStore",
            "metadata": {"name": node},
            "status": {
                "capacity": {"totalBytes": 10**12, "storedBytes": 8192, "usedPercent": 1},
                "models": models,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "Serving",
                        "message": "the store is serving",
                        "lastTransitionTime": "2026-12-07T10:00:00Z",
                    },
                    {
                        "type": "CapacityLow",
                        "status": "False",
                        "reason": "BelowHighWatermark",
                        "message": "1 % used",
                        "lastTransitionTime": "2026-12-07T10:00:00Z",
                    },
                ],
            },
        },
        field_manager="model-manager",
        subresource="status",
    )


async def _gpus_used(kube: Kube) -> dict[str, int]:
    items, _ = await kube.list(PODS, None)
    used = dict.fromkeys(NODES, 0)
    for pod in items:
        node = pod["spec"].get("nodeName")
        if node in used and (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in pod["spec"]["containers"]:
                limits = (c.get("resources") or {}).get("limits") or {}
                used[node] += int(limits.get("nvidia.com/gpu", 0))
    return used


def _card_holder(node: str) -> dict[str, Any]:
    """A Pod bound straight to ``node`` (no scheduler, no queue) holding four cards there."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"cards-{node}"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "main",
                    "image": "pause:3.10",
                    "resources": {"limits": {"nvidia.com/gpu": "4"}},
                }
            ],
        },
    }


async def _weights(kube: Kube, ns: str, name: str, reason: str) -> dict[str, Any] | None:
    md = await get_md(kube, ns, name)
    found = condition(md, "WeightsReady") if md is not None else None
    return found if found is not None and found.get("reason") == reason else None


async def test_node_stores_feed_the_artifact_and_place_a_replacement(
    kube: Kube, cluster: Cluster, hub: HubServer
) -> None:
    for name in NODES:
        cluster.apply(
            cluster.node_manifest(FakeNode(name, labels={"gpustack.ai/worker": WORKER_LABEL}))
        )
    setup = await node_delivery_setup(
        kube, cluster, hub_url=hub.url, tag="nms", worker_label=WORKER_LABEL
    )
    entrance, system, ns = setup.entrance, setup.system, setup.namespace
    await kube.create(MODEL_ARTIFACTS, _artifact("weights"), ns)
    stores: list[str] = []
    driver = False
    async with running_controller(cluster.kubeconfig, namespace=system):
        try:
            md = deployment("chat", ns, entrance.role(replicas=1))
            md["spec"]["model"]["artifactRef"] = {"name": "weights"}
            await kube.create(MODEL_DEPLOYMENTS, md, ns)
            unavailable = await eventually(
                lambda: _weights(kube, ns, "chat", "NodeDeliveryUnavailable"),
                timeout=60,
                what="NodeDeliveryUnavailable without the CSIDriver",
            )
            assert CSI_DRIVER in unavailable["message"]
            assert not await pods_of(kube, ns, "chat")
            artifact = await kube.get(MODEL_ARTIFACTS, "weights", ns)
            assert artifact is not None
            resolved = artifact["status"]["resolved"]
            digest, size = resolved["manifestDigest"], resolved["sizeBytes"]

            # The node plugin's driver appears: the Pod is created and mounts (KWOK).
            await kube.create(
                CSI_DRIVERS,
                {
                    "apiVersion": "storage.k8s.io/v1",
                    "kind": "CSIDriver",
                    "metadata": {"name": CSI_DRIVER},
                    "spec": {
                        "attachRequired": False,
                        "podInfoOnMount": True,
                        "volumeLifecycleModes": ["Ephemeral"],
                    },
                },
            )
            driver = True
            await eventually(
                lambda: _weights(kube, ns, "chat", "Mounted"),
                timeout=90,
                what="WeightsReady=True Mounted once the CSIDriver exists",
            )
            (first,) = live(await pods_of(kube, ns, "chat"))
            first_node = first["spec"]["nodeName"]
            assert "affinity" not in first["spec"]  # no node holds the digest yet

            # Records: the digest Ready on another node, made the busiest by a Pod bound to it
            # that holds four cards (so the scheduler's own scores would not pick it first),
            # and downloading on a third.
            holder, third = (n for n in NODES if n != first_node)
            await kube.create(PODS, _card_holder(holder), ns)
            used = await _gpus_used(kube)
            assert used[holder] == 4 and used[third] == 0, used
            ready = {
                "digest": digest,
                "state": "Ready",
                "sizeBytes": size,
                "downloadedBytes": size,
                "referenced": 0,
                "lastUsedTime": "2026-12-07T10:00:00Z",
                "source": "huggingFace:org/node-model@" + resolved["revision"],
            }
            await _write_store(kube, holder, [ready])
            stores.append(holder)
            downloading = {**ready, "state": "Downloading", "downloadedBytes": size // 4}
            await _write_store(kube, third, [downloading])
            stores.append(third)

            async def counted(want: dict[str, int]) -> dict[str, Any] | None:
                obj = await kube.get(MODEL_ARTIFACTS, "weights", ns)
                nodes = ((obj or {}).get("status") or {}).get("nodes")
                return obj if nodes == want else None

            first_count = {"ready": 1, "downloading": 1, "failed": 0, "downloadingPercent": 25}

            counted_obj = await eventually(
                lambda: counted(first_count), timeout=60, what="status.nodes from the records"
            )
            first_write = time.monotonic()
            # status.nodes belongs to its own field manager, never to the resolution's.
            managers = {
                m["manager"]: json.dumps(m.get("fieldsV1"))
                for m in counted_obj["metadata"]["managedFields"]
                if m.get("subresource") == "status"
            }
            assert '"f:nodes"' in managers["gpustack-controller-nodes"]
            assert '"f:nodes"' not in managers["gpustack-controller"]
            assert '"f:resolved"' in managers["gpustack-controller"]
            # The third node's download fails: counted again, but not within 30 s of the last
            # write (checked once the placement below is done).
            failed = {
                **downloading,
                "state": "Failed",
                "reason": "DigestMismatch",
                "message": "model.safetensors: sha256 differs",
                "retryTime": "2026-12-07T10:01:00Z",
            }
            await _write_store(kube, third, [failed])
            # Progress at full precision, as docs/node-store.md shows it: kubectl's own
            # custom columns over the records, filtered on the digest.
            columns = ",".join(
                [
                    "NODE:.metadata.name",
                    f'STATE:.status.models[?(@.digest=="{digest}")].state',
                    f'DOWNLOADED:.status.models[?(@.digest=="{digest}")].downloadedBytes',
                    f'SIZE:.status.models[?(@.digest=="{digest}")].sizeBytes',
                ]
            )
            shown = cluster.kubectl(
                "get", "nms", holder, third, "-o", f"custom-columns={columns}"
            ).stdout.split("\n")
            assert shown[0].split() == ["NODE", "STATE", "DOWNLOADED", "SIZE"]
            assert [line.split() for line in shown[1:3]] == [
                [holder, "Ready", str(size), str(size)],
                [third, "Failed", str(size // 4), str(size)],
            ]
            # The records moved no running Pod: the preference is outside the hash.
            (still,) = live(await pods_of(kube, ns, "chat"))
            assert still["metadata"]["uid"] == first["metadata"]["uid"]

            # The Pod goes; its replacement prefers, and gets, the node holding the digest.
            await kube.delete(PODS, first["metadata"]["name"], ns)

            async def replaced() -> dict[str, Any] | None:
                for pod in live(await pods_of(kube, ns, "chat")):
                    if pod["metadata"]["uid"] != first["metadata"]["uid"] and pod["spec"].get(
                        "nodeName"
                    ):
                        return pod
                return None

            second = await eventually(replaced, timeout=90, what="the replacement scheduled")
            preferred = second["spec"]["affinity"]["nodeAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ]
            assert preferred == [
                {
                    "weight": 100,
                    "preference": {
                        "matchFields": [
                            {"key": "metadata.name", "operator": "In", "values": [holder]}
                        ]
                    },
                }
            ]
            assert second["spec"]["nodeName"] == holder, (first_node, holder, used)
            hashes = {p["metadata"]["annotations"][POD_SPEC_HASH] for p in (first, second)}
            assert len(hashes) == 1

            recounted = {"ready": 1, "downloading": 0, "failed": 1}
            await eventually(
                lambda: counted(recounted), timeout=60, what="status.nodes counts the failure"
            )
            assert time.monotonic() - first_write >= 29.0
        finally:
            await tear_down(kube, ns, "chat")
            for name in NODES:
                await kube.delete(NODES_RESOURCE, name)
            for node in stores:
                await kube.delete(NODE_MODEL_STORES, node)
            if driver:
                await kube.delete(CSI_DRIVERS, CSI_DRIVER)
