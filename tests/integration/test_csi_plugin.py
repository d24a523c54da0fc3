"""The CSI node plugin as a real process (python -m gpustack_modelmanager's ``run``), with the
test double of our own node store (tests/support/csiplugin.py), against a real kube-apiserver:

* ``csi-sanity``, the CSI spec's conformance suite (kubernetes-csi/csi-test, built from its Go
  module by hack/envtest/build-csi-sanity.sh), passes against the plugin's socket; only the
  specs that need a Controller service are skipped, and the number that ran is asserted;
* the kubelet stand-in: a gRPC client sending exactly the NodePublishVolume and
  NodeUnpublishVolume requests kubelet sends for an inline ephemeral volume (kubelet's
  pkg/volume/csi/csi_mounter.go ``SetUpAt`` and csi_client.go ``NodePublishVolume``, Kubernetes
  v1.35.4, the module hack/envtest/kubernetes pins), to the plugin running in a private mount
  namespace ("the node", ``unshare -m``) whose kubelet directory is a shared mount, as the
  DaemonSet's ``Bidirectional`` propagation makes it. The bind mounts are real: the node sees the
  tree read-only at the Pod's target; another namespace's Pod is refused ``PermissionDenied``;
  unpublish unmounts and removes the target.

The plugin authenticates as the ServiceAccount of deploy/model-manager (a client certificate of
that user name), so every read it makes is judged by that RBAC.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from support.csi import artifact_object, digest_of, volume_context

from gpustack_modelmanager.csi.proto import pb, services
from gpustack_render.cli.yamlio import load_documents

from .controlplane import (
    APIError,
    ControlPlane,
    ManagedProcess,
    start_process,
    started_control_plane,
    wait_until_ready,
)

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "gpustack-system"
ACCOUNT = f"system:serviceaccount:{SYSTEM}:gpustack-model-manager"
DIGEST = digest_of("tiny model")
PENDING = digest_of("a model still downloading")
FILES = {"config.json": '{"model_type": "tiny"}\n', "weights/model.safetensors": "0" * 4096}
#: csi-sanity's specs that run without a Controller service: Identity (GetPluginCapabilities,
#: Probe, GetPluginInfo), NodeGetCapabilities, NodeGetInfo, NodePublishVolume's three
#: missing-field specs, NodeUnpublishVolume's two. The other Node specs skip themselves: they
#: test capabilities the plugin does not offer (staging, stats, expansion, health, multi-writer).
SANITY_SPECS = 10
#: Every spec of csi-test v5.6.0 (a new version changes it: then read what the new specs need).
SANITY_TOTAL = 103
#: Skipped with a reason (each needs a Controller service to create the volume first):
SANITY_SKIP = [
    # Every "[Controller Server]" spec: CreateVolume, ListVolumes, snapshots, expansion...
    r"\[Controller Server\]",
    # NodeUnpublishVolume "should remove target path" publishes a volume made by CreateVolume.
    r"should remove target path",
]


@dataclass
class Node:
    """A mount namespace standing for a node, its kubelet directory a shared mount."""

    holder: ManagedProcess
    kubelet: Path

    @property
    def pid(self) -> int:
        return self.holder.popen.pid

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["nsenter", "-t", str(self.pid), "-m", "--", *argv],
            capture_output=True,
            text=True,
            timeout=30,
        )

    def mounts(self) -> dict[str, str]:
        """Mount point -> options, as the node sees them."""
        out = {}
        for line in Path(f"/proc/{self.pid}/mountinfo").read_text().splitlines():
            fields = line.split()
            out[fields[4]] = fields[5]
        return out


def start_node(root: Path) -> Node:
    """A private mount namespace held by a sleeping process, its kubelet directory
    (``root/kubelet``) bind-mounted onto itself and made shared, as a node's is for
    ``Bidirectional`` propagation."""
    holder = start_process(
        "node",
        ["unshare", "-m", "--propagation", "private", "sleep", "3600"],
        root / "node.log",
    )
    node = Node(holder, root / "kubelet")
    node.kubelet.mkdir()
    time.sleep(0.2)
    for argv in (
        ["mount", "--bind", str(node.kubelet), str(node.kubelet)],
        ["mount", "--make-rshared", str(node.kubelet)],
    ):
        done = node.run(*argv)
        assert done.returncode == 0, done.stderr
    return node


@dataclass
class Plugin:
    plane: ControlPlane
    node: Node
    process: ManagedProcess
    socket: Path
    trees: Path


def _namespace(plane: ControlPlane, name: str) -> None:
    try:
        plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": name}})
    except APIError as exc:
        if exc.status != 409:
            raise


def _apply_rbac(plane: ControlPlane) -> None:
    _namespace(plane, SYSTEM)
    paths = {
        "ClusterRole": "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "ClusterRoleBinding": "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "Role": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SYSTEM}/roles",
        "RoleBinding": f"/apis/rbac.authorization.k8s.io/v1/namespaces/{SYSTEM}/rolebindings",
    }
    text = (REPO / "deploy" / "model-manager" / "rbac.yaml").read_text()
    for doc in load_documents(text):
        plane.request("POST", paths[doc["kind"]], doc)


def _create_artifact(plane: ControlPlane, namespace: str, name: str, digest: str) -> str:
    _namespace(plane, namespace)
    base = f"/apis/worker.gpustack.ai/v1/namespaces/{namespace}/modelartifacts"
    body = artifact_object(namespace, name, uid="", digest=digest)
    status = body.pop("status")
    body["metadata"] = {"name": name, "namespace": namespace}
    _, created = plane.request("POST", base, body)
    created["status"] = status
    for cond in status["conditions"]:
        cond["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    plane.request("PUT", f"{base}/{name}/status", created)
    return str(created["metadata"]["uid"])


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plugin]:
    for tool in ("unshare", "nsenter", "mount"):
        assert shutil.which(tool), f"{tool} (util-linux) is needed"
    root = tmp_path_factory.mktemp("csi")
    with started_control_plane() as plane:
        _apply_rbac(plane)
        kubeconfig = plane.user_kubeconfig(ACCOUNT, ["system:serviceaccounts"])
        node = start_node(root)
        socket = root / "plugin" / "csi.sock"
        trees = root / "store"
        trees.mkdir()
        process = start_process(
            "model-manager",
            [
                # The plugin's own mount namespace, a copy of the node's: the shared kubelet
                # directory stays in the node's peer group (Bidirectional propagation).
                *("nsenter", "-t", str(node.pid), "-m", "--"),
                *("unshare", "-m", "--propagation", "unchanged"),
                sys.executable,
                str(REPO / "tests" / "support" / "csiplugin.py"),
                f"--trees={trees}",
                f"--csi-address=unix://{socket}",
                "--node-name=node-a",
                f"--kubeconfig={kubeconfig}",
                f"--namespace={SYSTEM}",
            ],
            root / "plugin.log",
        )
        try:
            wait_until_ready(
                process, socket.exists, time.monotonic() + 60, 60, error=AssertionError
            )
            yield Plugin(plane, node, process, socket, trees)
        finally:
            process.stop()
            node.holder.stop()


def _stubs(plugin: Plugin) -> tuple[Any, grpc.Channel]:
    channel = grpc.insecure_channel(f"unix://{plugin.socket}")
    return services.NodeStub(channel), channel


def _kubelet_publish(target: Path, context: dict[str, str], pod_uid: str) -> Any:
    """The request kubelet's csiDriverClient.NodePublishVolume builds for an inline volume:
    volume id csi-<sha256(podUID + volume name)> (csi_mounter.go makeVolumeHandle), readonly from
    the volume, access mode SINGLE_NODE_WRITER (ReadWriteOnce mapped, the driver offering no
    SINGLE_NODE_MULTI_WRITER), a mount capability with kubelet's empty fsType and no flags, no
    staging path, the attributes merged with podInfoOnMount's, the secrets (none here)."""
    request = pb.NodePublishVolumeRequest(
        volume_id="csi-" + hashlib.sha256(f"{pod_uid}gpustack-model".encode()).hexdigest(),
        target_path=str(target),
        readonly=True,
        volume_context=context,
        secrets={},
    )
    request.volume_capability.access_mode.mode = (
        pb.VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER
    )
    request.volume_capability.mount.fs_type = ""
    return request


def _target(node: Node, pod_uid: str) -> Path:
    """kubelet's target: <pods>/<uid>/volumes/kubernetes.io~csi/<volume>/mount; kubelet makes
    the parent (MkdirAll 0750), the driver the target itself."""
    target = node.kubelet / "pods" / pod_uid / "volumes" / "kubernetes.io~csi" / "gpustack-model"
    target.mkdir(parents=True, mode=0o750)
    return target / "mount"


def test_csi_sanity_passes(plugin: Plugin) -> None:
    built = subprocess.run(
        ["bash", str(REPO / "hack" / "envtest" / "build-csi-sanity.sh")],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
        timeout=1800,
    )
    sanity = Path(built.stdout.strip().splitlines()[-1])
    work = plugin.socket.parent.parent / "sanity"
    work.mkdir()
    done = subprocess.run(
        [
            str(sanity),
            f"--csi.endpoint=unix://{plugin.socket}",
            f"--csi.mountdir={work / 'mount'}",
            f"--csi.stagingdir={work / 'staging'}",
            f"--ginkgo.skip={'|'.join(SANITY_SKIP)}",
            "--ginkgo.no-color",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    ran = re.search(r"Ran (\d+) of (\d+) Specs", out)
    passed = re.search(r"(\d+) Passed \| (\d+) Failed", out)
    assert ran and passed, out[-4000:]
    assert (int(ran.group(1)), int(ran.group(2))) == (SANITY_SPECS, SANITY_TOTAL), out[-4000:]
    assert (int(passed.group(1)), int(passed.group(2))) == (SANITY_SPECS, 0)


def test_kubelet_publish_mounts_read_only_and_unpublish_unmounts(plugin: Plugin) -> None:
    uid = _create_artifact(plugin.plane, "team-a", "tiny", DIGEST)
    tree = plugin.trees / DIGEST.removeprefix("sha256:")
    for rel, text in FILES.items():
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    node, (stub, channel) = plugin.node, _stubs(plugin)
    target = _target(node, "pod-a-uid")
    context = volume_context(
        artifact="tiny", uid=uid, digest=DIGEST, pod_namespace="team-a", pod_uid="pod-a-uid"
    )
    request = _kubelet_publish(target, context, "pod-a-uid")
    with channel:
        stub.NodePublishVolume(request, timeout=30)
        # The node (and so kubelet and the Pod's containers) sees the tree, read-only.
        assert node.mounts()[str(target)].split(",")[0] == "ro"
        seen = node.run("cat", str(target / "config.json"))
        assert seen.stdout == FILES["config.json"]
        wrote = node.run("sh", "-c", f"echo x > {target / 'config.json'}")
        assert wrote.returncode != 0 and "Read-only file system" in wrote.stderr
        # kubelet retries a publish it is unsure of: the same target is success, mounted once.
        stub.NodePublishVolume(request, timeout=30)
        table = Path(f"/proc/{node.pid}/mountinfo").read_text()
        assert table.count(f" {target} ") == 1
        # This test process is outside the node's namespace: nothing leaked to the host.
        assert not (target / "config.json").exists()

        stub.NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(volume_id=request.volume_id, target_path=str(target)),
            timeout=30,
        )
        assert str(target) not in node.mounts()
        assert not target.exists()
        # Idempotent: a second unpublish of the gone target is success.
        stub.NodeUnpublishVolume(
            pb.NodeUnpublishVolumeRequest(volume_id=request.volume_id, target_path=str(target)),
            timeout=30,
        )


def test_another_namespaces_pod_is_refused(plugin: Plugin) -> None:
    """A Pod of team-b copying team-a's volume attributes (name, UID, digest): kubelet puts
    team-b in the context, the plugin reads team-b/tiny, which is not there or not the same."""
    uid = _create_artifact(plugin.plane, "team-a", "tiny-2", DIGEST)
    node, (stub, channel) = plugin.node, _stubs(plugin)
    target = _target(node, "pod-b-uid")
    context = volume_context(
        artifact="tiny-2", uid=uid, digest=DIGEST, pod_namespace="team-b", pod_uid="pod-b-uid"
    )
    with channel, pytest.raises(grpc.RpcError) as err:
        stub.NodePublishVolume(_kubelet_publish(target, context, "pod-b-uid"), timeout=30)
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "team-b/tiny-2 does not exist" in (err.value.details() or "")
    assert not target.exists() and str(target) not in node.mounts()


def test_a_tree_still_materializing_is_aborted(plugin: Plugin) -> None:
    uid = _create_artifact(plugin.plane, "team-c", "big", PENDING)
    (plugin.trees / "pending.txt").write_text(PENDING + "\n")
    node, (stub, channel) = plugin.node, _stubs(plugin)
    target = _target(node, "pod-c-uid")
    context = volume_context(
        artifact="big", uid=uid, digest=PENDING, pod_namespace="team-c", pod_uid="pod-c-uid"
    )
    with channel, pytest.raises(grpc.RpcError) as err:
        stub.NodePublishVolume(_kubelet_publish(target, context, "pod-c-uid"), timeout=30)
    assert err.value.code() == grpc.StatusCode.ABORTED
    assert "100/1000 bytes (10 %)" in (err.value.details() or "")
    assert not target.exists()
