"""Node delivery on the simulated cluster with REAL node plugins (docs/node-store.md): the
controller, the real scheduler, Kueue and KWOK Nodes, and one node plugin process
(tests/support/csiplugin.py without ``--trees``: the plugin with its real store) per KWOK node a
Pod lands on, named after that node, with its own store root, in a mount namespace of its own.
The kubelet stand-in (tests/integration/test_csi_plugin.py, kubelet v1.35.4's inline-volume
requests) publishes the volume of the Pod the scheduler placed, read from the Pod itself.

- The first Pod's publish downloads the tree from the test hub (``Aborted`` until it is there)
  and mounts it; the record that plugin wrote feeds the artifact's ``status.nodes``.
- The Pod goes; its replacement carries the preference for the node whose plugin holds the
  digest (from that plugin's record), lands there, and its publish fetches zero bytes.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
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
from gpustack_modelmanager.csi.proto import pb, services
from gpustack_render.weights.delivery import CSI_DRIVER, MODEL_VOLUME
from gpustack_render.weights.mounts import EPHEMERAL, POD_NAME, POD_NAMESPACE, POD_UID

from .cluster import Cluster
from .controller_fixtures import (
    deployment,
    eventually,
    live,
    node_delivery_setup,
    pods_of,
    running_controller,
    tear_down,
)
from .controlplane import ManagedProcess, start_process
from .test_csi_plugin import _kubelet_publish

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REPO = Path(__file__).resolve().parents[2]
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": b'{"model_type": "llama"}\n',
    "model.safetensors": (bytes(range(256)) * 4096, True),
}


@pytest_asyncio.fixture(loop_scope="session")
async def hub() -> AsyncIterator[HubServer]:
    server = HubServer()
    server.repo("org/plugin-model").add_commit(FILES, ref="main")
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@dataclass
class Plugins:
    """One node plugin per KWOK node, started when a Pod first needs it."""

    root: Path
    kubeconfig: Path
    system: str
    running: dict[str, tuple[ManagedProcess, Path]] = field(default_factory=dict)

    async def of(self, node: str) -> tuple[ManagedProcess, Path]:
        if node in self.running:
            return self.running[node]
        home = self.root / node
        home.mkdir()
        socket = home / "csi.sock"
        process = start_process(
            f"model-manager-{node}",
            [
                # A mount namespace of its own: the plugin's mounts are that node's.
                *("unshare", "-m", "--propagation", "private"),
                sys.executable,
                str(REPO / "tests" / "support" / "csiplugin.py"),
                f"--store-root={home / 'store'}",
                f"--csi-address=unix://{socket}",
                f"--node-name={node}",
                f"--kubeconfig={self.kubeconfig}",
                f"--namespace={self.system}",
            ],
            home / "plugin.log",
        )
        self.running[node] = (process, socket)
        deadline = time.monotonic() + 60
        while not socket.exists():
            assert process.popen.poll() is None, process.log_tail()
            assert time.monotonic() < deadline, process.log_tail()
            await asyncio.sleep(0.1)
        return process, socket

    def stop(self) -> None:
        for process, _ in self.running.values():
            process.stop()


def _request_for(pod: dict[str, Any], plugins: Plugins) -> Any:
    """kubelet's NodePublishVolume for the Pod's model volume (its attributes with
    podInfoOnMount's keys), at kubelet's target under the node's directory."""
    (volume,) = [v for v in pod["spec"]["volumes"] if v["name"] == MODEL_VOLUME]
    meta = pod["metadata"]
    context = {
        **volume["csi"]["volumeAttributes"],
        POD_NAMESPACE: meta["namespace"],
        POD_NAME: meta["name"],
        POD_UID: meta["uid"],
        "csi.storage.k8s.io/serviceAccount.name": "default",
        EPHEMERAL: "true",
    }
    parent = (
        plugins.root
        / f"kubelet-{pod['spec']['nodeName']}"
        / "pods"
        / meta["uid"]
        / "volumes"
        / "kubernetes.io~csi"
        / MODEL_VOLUME
    )
    parent.mkdir(parents=True, mode=0o750)
    return _kubelet_publish(parent / "mount", context, meta["uid"])


async def _publish(plugins: Plugins, pod: dict[str, Any]) -> tuple[Any, int]:
    """Publish the Pod's volume as kubelet does (again while ``Aborted``); the request and how
    many ``Aborted`` answers came first."""
    process, socket = await plugins.of(pod["spec"]["nodeName"])
    request = _request_for(pod, plugins)
    aborted = 0
    async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
        stub = services.NodeStub(channel)
        deadline = time.monotonic() + 30
        while True:
            try:
                await stub.NodePublishVolume(request, timeout=30)
                break
            except grpc.aio.AioRpcError as err:
                assert err.code() == grpc.StatusCode.ABORTED, (err.details(), process.log_tail())
                assert time.monotonic() < deadline, process.log_tail()
                aborted += 1
                await asyncio.sleep(0.2)
    mounts = Path(f"/proc/{process.popen.pid}/mountinfo").read_text().split("\n")
    (line,) = [m for m in mounts if f" {request.target_path} " in m]
    assert line.split()[5].split(",")[0] == "ro"
    return request, aborted


async def _unpublish(plugins: Plugins, node: str, request: Any) -> None:
    _, socket = await plugins.of(node)
    async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
        await services.NodeStub(channel).NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(
                volume_id=request.volume_id, target_path=request.target_path
            ),
            timeout=30,
        )


async def _model(kube: Kube, node: str, digest: str) -> dict[str, Any]:
    record = await kube.get(NODE_MODEL_STORES, node) or {}
    for model in (record.get("status") or {}).get("models") or []:
        if model["digest"] == digest:
            return dict(model)
    return {}


async def test_real_plugins_feed_status_nodes_and_the_replacement_downloads_nothing(
    kube: Kube, cluster: Cluster, hub: HubServer, tmp_path: Path
) -> None:
    setup = await node_delivery_setup(kube, cluster, hub_url=hub.url, tag="nmp")
    entrance, system, ns = setup.entrance, setup.system, setup.namespace
    await kube.create(
        MODEL_ARTIFACTS,
        {
            "apiVersion": "worker.gpustack.ai/v1",
            "kind": "ModelArtifact",
            "metadata": {"name": "weights"},
            "spec": {
                "source": {"huggingFace": {"repository": "org/plugin-model", "revision": "main"}}
            },
        },
        ns,
    )
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
    plugins = Plugins(tmp_path, cluster.kubeconfig, system)
    published: list[tuple[str, Any]] = []
    try:
        async with running_controller(cluster.kubeconfig, namespace=system):
            try:
                md = deployment("chat", ns, entrance.role(replicas=1))
                md["spec"]["model"]["artifactRef"] = {"name": "weights"}
                await kube.create(MODEL_DEPLOYMENTS, md, ns)

                async def placed() -> dict[str, Any] | None:
                    pods = live(await pods_of(kube, ns, "chat"))
                    return pods[0] if pods and pods[0]["spec"].get("nodeName") else None

                first = await eventually(placed, timeout=90, what="the first Pod placed")
                node = first["spec"]["nodeName"]
                artifact = await kube.get(MODEL_ARTIFACTS, "weights", ns)
                assert artifact is not None
                digest = artifact["status"]["resolved"]["manifestDigest"]
                size = artifact["status"]["resolved"]["sizeBytes"]

                # The first Pod's publish on its node: downloaded, then mounted.
                request, aborted = await _publish(plugins, first)
                published.append((node, request))
                assert aborted >= 1
                fetches = [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]
                assert len(fetches) == len(FILES)

                async def ready_on_node() -> dict[str, Any] | None:
                    # Ready is written when the download ends, the reference once it is mounted.
                    model = await _model(kube, node, digest)
                    held = (model.get("state"), model.get("referenced")) == ("Ready", 1)
                    return model if held else None

                model = await eventually(ready_on_node, timeout=30, what="the plugin's record")
                assert model["downloadedBytes"] == model["sizeBytes"] == size

                async def counted() -> dict[str, Any] | None:
                    obj = await kube.get(MODEL_ARTIFACTS, "weights", ns)
                    nodes = ((obj or {}).get("status") or {}).get("nodes")
                    return nodes if nodes == {"ready": 1, "downloading": 0, "failed": 0} else None

                # status.nodes is written at most every 30 s: the Downloading record may have
                # been counted first.
                await eventually(counted, timeout=75, what="status.nodes from the plugin's record")

                # The Pod goes (kubelet unpublishes its volume); its replacement prefers the
                # node whose plugin holds the digest, lands there and downloads nothing.
                await _unpublish(plugins, node, request)
                published.clear()
                await kube.delete(PODS, first["metadata"]["name"], ns)

                async def replaced() -> dict[str, Any] | None:
                    for pod in live(await pods_of(kube, ns, "chat")):
                        if pod["metadata"]["uid"] != first["metadata"]["uid"] and pod["spec"].get(
                            "nodeName"
                        ):
                            return pod
                    return None

                second = await eventually(replaced, timeout=90, what="the replacement placed")
                preferred = second["spec"]["affinity"]["nodeAffinity"][
                    "preferredDuringSchedulingIgnoredDuringExecution"
                ]
                assert preferred[-1]["preference"]["matchFields"] == [
                    {"key": "metadata.name", "operator": "In", "values": [node]}
                ]
                assert second["spec"]["nodeName"] == node
                again, aborted = await _publish(plugins, second)
                published.append((node, again))
                assert aborted == 0
                assert [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p] == (
                    fetches
                )
                assert list(plugins.running) == [node]

                async def referenced_again() -> dict[str, Any] | None:
                    model = await _model(kube, node, digest)
                    return model if model.get("referenced") == 1 else None

                await eventually(referenced_again, timeout=30, what="the replacement's reference")
            finally:
                for where, req in published:
                    await _unpublish(plugins, where, req)
                await tear_down(kube, ns, "chat")
    finally:
        plugins.stop()
        for node in plugins.running:
            await kube.delete(NODE_MODEL_STORES, node)
        await kube.delete(CSI_DRIVERS, CSI_DRIVER)
