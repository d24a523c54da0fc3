"""The node plugin with its REAL node store, end to end (docs/node-store.md): the plugin process
(tests/support/csiplugin.py without ``--trees``: ``gpustack_modelmanager.__main__.run`` building
``gpustack_modelmanager.store.ModelStore`` with its ``NodeModelStore`` writer) against a real
kube-apiserver and the local test hub (tests/support/hubserver.py, here in a thread of the test
process), driven by the kubelet stand-in of tests/integration/test_csi_plugin.py (kubelet
v1.35.4's inline-volume NodePublishVolume/NodeUnpublishVolume) in a private mount namespace:

* the first publish answers ``Aborted`` while the tree downloads, then (kubelet retrying) mounts
  the verified tree read-only; the node's ``NodeModelStore`` says ``Ready``, ``referenced: 1``;
* the replacement Pod's publish of the same digest fetches nothing from the hub and mounts;
* a byte the hub corrupts is never mounted and the record says why;
* another namespace's artifact anchored to the same digest is refused while the hub refuses its
  token, and granted once its token lists the repository;
* unpublish releases the reference.
"""

from __future__ import annotations

import asyncio
import hashlib
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from aiohttp import web
from support.csi import artifact_object, volume_context
from support.hubserver import HubFile, HubServer

from gpustack_modelmanager.csi.proto import pb, services
from gpustack_render.schema.resources import project_resource
from gpustack_render.weights.manifest import ManifestEntry, build_manifest, filtered

from .controlplane import ControlPlane, start_process, started_control_plane, wait_until_ready
from .test_csi_plugin import (
    ACCOUNT,
    SYSTEM,
    Node,
    _apply_rbac,
    _kubelet_publish,
    _namespace,
    start_node,
)

pytestmark = [pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
NODE = "node-a"
TOKEN = "hf_token_of_team_a"
RECORD = project_resource("NodeModelStore").path(None, NODE)
ARTIFACTS = "/apis/worker.gpustack.ai/v1/namespaces/{}/modelartifacts"
T = TypeVar("T")

#: The artifact's patterns (tests/support/csi.py) drop ``*.bin``: never fetched.
CONFIG = b'{"model_type": "tiny"}\n'
FILES: dict[str, bytes | tuple[bytes, bool]] = {
    "config.json": CONFIG,
    "model.safetensors": (bytes(range(256)) * 8192, True),
    "pytorch_model.bin": (b"\x01" * 65536, True),
}
BAD = {"config.json": b'{"model_type": "bad"}\n', "model.safetensors": (b"\x02" * 65536, True)}


class CorruptingHub(HubServer):
    """The test hub, serving the files named in :attr:`corrupt` (``<repo>/<path>``) with their
    first byte flipped (the listing still names the true digest)."""

    def __init__(self) -> None:
        super().__init__()
        self.corrupt: set[str] = set()

    def fetches(self) -> list[str]:
        return [p for m, p, _ in self.requests if m == "GET" and "/resolve/" in p]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        answer = await super()._handle(request)
        repo, _, rest = request.path.strip("/").partition("/resolve/")
        name = f"{repo}/{rest.split('/', 1)[-1]}"
        if rest and name in self.corrupt and isinstance(answer, web.Response):
            body = answer.body
            if isinstance(body, bytes) and body:
                answer.body = bytes([body[0] ^ 0xFF]) + body[1:]
        return answer


class ThreadHub:
    """A :class:`CorruptingHub` served from an event loop of its own thread."""

    def __init__(self) -> None:
        self.server = CorruptingHub()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.call(self.server.start())

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def stop(self) -> None:
        self.call(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)


@dataclass
class Repo:
    repository: str
    commit: str
    digest: str
    size: int


def _repo(hub: ThreadHub, repository: str, files: Mapping[str, Any], token: str | None) -> Repo:
    repo = hub.server.repo(repository, token=token)
    commit = repo.add_commit(files, ref="main")
    built: dict[str, HubFile] = repo.commits[commit]
    entries = [
        ManifestEntry(f.path, "sha256" if f.lfs else "gitsha1", f.etag, f.size)
        for f in built.values()
    ]
    manifest = build_manifest(filtered(entries, None, ["*.bin"]))
    return Repo(repository, commit, manifest.digest, manifest.size_bytes)


def _artifact(
    plane: ControlPlane,
    namespace: str,
    name: str,
    repo: Repo,
    *,
    secret: str | None = "hub-token",
    digest_source: str = "Hub",
) -> str:
    """A resolved artifact of ``repo`` (``Expected``: anchored, no commit); its UID."""
    _namespace(plane, namespace)
    body = artifact_object(
        namespace, name, uid="", digest=repo.digest, secret=secret, digest_source=digest_source
    )
    body["spec"]["source"]["huggingFace"]["repository"] = repo.repository
    status = body.pop("status")
    resolved = status["resolved"]
    if digest_source == "Hub":
        resolved["revision"] = repo.commit
    resolved.update(fileCount=2, sizeBytes=repo.size)
    for cond in status["conditions"]:
        cond["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    body["metadata"] = {"name": name, "namespace": namespace}
    _, created = plane.request("POST", ARTIFACTS.format(namespace), body)
    created["status"] = status
    plane.request("PUT", f"{ARTIFACTS.format(namespace)}/{name}/status", created)
    return str(created["metadata"]["uid"])


@dataclass
class Plugin:
    plane: ControlPlane
    node: Node
    hub: ThreadHub
    socket: Path
    good: Repo
    bad: Repo

    def publish(
        self, namespace: str, artifact: str, uid: str, repo: Repo, pod: str, **kw: Any
    ) -> Any:
        """kubelet's request for Pod ``pod``'s volume, and its target."""
        target = self.node.kubelet / "pods" / pod / "volumes" / "kubernetes.io~csi" / "model"
        target.mkdir(parents=True, mode=0o750, exist_ok=True)
        context = volume_context(
            artifact=artifact, uid=uid, digest=repo.digest, pod_namespace=namespace, pod_uid=pod
        )
        request = _kubelet_publish(target / "mount", context, pod)
        request.secrets.update(kw.get("secrets", {"token": TOKEN}))
        return request

    def record(self) -> dict[str, Any]:
        _, found = self.plane.request("GET", RECORD)
        return dict(found)

    def model(self, digest: str) -> dict[str, Any]:
        for model in self.record().get("status", {}).get("models", []):
            if model["digest"] == digest:
                return dict(model)
        return {}


def _until(what: str, probe: Callable[[], T | None], timeout: float = 30) -> T:
    deadline = time.monotonic() + timeout
    while True:
        try:
            found = probe()
        except Exception:  # not there yet (the record is created by the plugin)
            found = None
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plugin]:
    root = tmp_path_factory.mktemp("csistore")
    hub = ThreadHub()
    good = _repo(hub, "org/tiny", FILES, TOKEN)
    bad = _repo(hub, "org/bad", BAD, None)
    hub.server.corrupt.add("org/bad/model.safetensors")
    try:
        with started_control_plane() as plane:
            _apply_rbac(plane)
            plane.request(
                "POST",
                f"/api/v1/namespaces/{SYSTEM}/configmaps",
                {
                    "metadata": {"name": "gpustack-settings"},
                    "data": {"model-artifact-huggingface-endpoint": hub.server.url},
                },
            )
            kubeconfig = plane.user_kubeconfig(ACCOUNT, ["system:serviceaccounts"])
            node = start_node(root)
            socket = root / "plugin" / "csi.sock"
            process = start_process(
                "model-manager",
                [
                    *("nsenter", "-t", str(node.pid), "-m", "--"),
                    *("unshare", "-m", "--propagation", "unchanged"),
                    sys.executable,
                    str(REPO / "tests" / "support" / "csiplugin.py"),
                    f"--store-root={root / 'store'}",
                    f"--csi-address=unix://{socket}",
                    f"--node-name={NODE}",
                    f"--kubeconfig={kubeconfig}",
                    f"--namespace={SYSTEM}",
                ],
                root / "plugin.log",
            )
            try:
                wait_until_ready(
                    process, socket.exists, time.monotonic() + 60, 60, error=AssertionError
                )
                yield Plugin(plane, node, hub, socket, good, bad)
            finally:
                process.stop()
                node.holder.stop()
    finally:
        hub.stop()


def _publish_until_settled(stub: Any, request: Any) -> grpc.RpcError | None:
    """Send ``request`` as kubelet does, again while it answers ``Aborted``: the final error,
    or ``None`` once it succeeded. The first answer must be ``Aborted`` (the download)."""
    first = True
    deadline = time.monotonic() + 30
    while True:
        try:
            stub.NodePublishVolume(request, timeout=30)
        except grpc.RpcError as err:
            if err.code() == grpc.StatusCode.ABORTED and time.monotonic() < deadline:
                assert "Materializing" in (err.details() or "")
                first = False
                time.sleep(0.1)
                continue
            assert not first, f"the first publish answered {err.code()}, not ABORTED"
            return err
        assert not first, "the first publish of an absent tree must answer ABORTED"
        return None


def test_publish_downloads_once_mounts_and_the_replacement_fetches_nothing(
    plugin: Plugin,
) -> None:
    node, good = plugin.node, plugin.good
    uid = _artifact(plugin.plane, "team-a", "tiny", good)
    channel = grpc.insecure_channel(f"unix://{plugin.socket}")
    stub = services.NodeStub(channel)
    with channel:
        first = plugin.publish("team-a", "tiny", uid, good, "pod-1")
        assert _publish_until_settled(stub, first) is None
        target = Path(first.target_path)
        assert node.mounts()[str(target)].split(",")[0] == "ro"
        assert node.run("cat", str(target / "config.json")).stdout == CONFIG.decode()
        seen = node.run("sha256sum", str(target / "model.safetensors")).stdout.split()[0]
        weights = FILES["model.safetensors"]
        assert isinstance(weights, tuple) and seen == hashlib.sha256(weights[0]).hexdigest()
        assert node.run("ls", str(target)).stdout.split() == ["config.json", "model.safetensors"]
        fetched = plugin.hub.server.fetches()
        assert len(fetched) == 2 and not any(".bin" in p for p in fetched)
        model = _until("Ready, referenced 1", lambda: _ready(plugin, good.digest, 1))
        assert model["downloadedBytes"] == model["sizeBytes"] == good.size
        assert model["source"] == f"huggingFace:org/tiny@{good.commit}"

        # The replacement Pod on the same node: mounted at once, zero bytes from the hub.
        second = plugin.publish("team-a", "tiny", uid, good, "pod-2")
        stub.NodePublishVolume(second, timeout=30)
        assert plugin.hub.server.fetches() == fetched
        assert node.mounts()[second.target_path].split(",")[0] == "ro"
        _until("referenced 2", lambda: _ready(plugin, good.digest, 2))

        for request in (first, second):
            stub.NodeUnpublishVolume(
                pb.NodeUnpublishVolumeRequest(
                    volume_id=request.volume_id, target_path=request.target_path
                ),
                timeout=30,
            )
            assert request.target_path not in node.mounts()
        _until("referenced 0", lambda: _ready(plugin, good.digest, 0))


def _ready(plugin: Plugin, digest: str, referenced: int) -> dict[str, Any] | None:
    model = plugin.model(digest)
    if model.get("state") == "Ready" and model.get("referenced", 0) == referenced:
        return model
    return None


def test_a_corrupted_byte_is_never_mounted_and_the_record_says_why(plugin: Plugin) -> None:
    bad = plugin.bad
    uid = _artifact(plugin.plane, "team-c", "bad", bad, secret=None)
    channel = grpc.insecure_channel(f"unix://{plugin.socket}")
    with channel:
        request = plugin.publish("team-c", "bad", uid, bad, "pod-c", secrets={})
        err = _publish_until_settled(services.NodeStub(channel), request)
    assert err is not None and err.code() == grpc.StatusCode.UNAVAILABLE
    assert "MaterializationFailed" in (err.details() or "")
    assert "DigestMismatch" in (err.details() or "")
    assert request.target_path not in plugin.node.mounts()
    assert not Path(request.target_path).exists()
    model = _until("Failed", lambda: plugin.model(bad.digest).get("state") == "Failed" or None)
    failed = plugin.model(bad.digest)
    assert model and failed["reason"] == "DigestMismatch"
    assert "model.safetensors" in failed["message"] and failed["retryTime"]


def test_an_anchor_of_another_namespaces_digest_needs_its_own_access(plugin: Plugin) -> None:
    """team-b's artifact anchored to team-a's private digest (digestSource Expected): the tree
    is on the node, but the hub refuses team-b's listing without a token, so the mount is
    refused; with a token the hub accepts, the store's listing proves team-b and it mounts."""
    good = plugin.good
    channel = grpc.insecure_channel(f"unix://{plugin.socket}")
    stub = services.NodeStub(channel)
    with channel:
        # The tree is held (the first test, or here if it runs alone).
        uid_a = _artifact(plugin.plane, "team-a", "tiny-held", good)
        held = plugin.publish("team-a", "tiny-held", uid_a, good, "pod-held")
        deadline = time.monotonic() + 30
        while True:
            try:
                stub.NodePublishVolume(held, timeout=30)
                break
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.ABORTED and time.monotonic() < deadline
                time.sleep(0.1)
        fetched = len(plugin.hub.server.fetches())

        uid_b = _artifact(plugin.plane, "team-b", "anchored", good, digest_source="Expected")
        refused = plugin.publish("team-b", "anchored", uid_b, good, "pod-b", secrets={})
        with pytest.raises(grpc.RpcError) as denied:
            stub.NodePublishVolume(refused, timeout=30)
        assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert "AccessRefused" in (denied.value.details() or "")
        assert "namespace team-b" in (denied.value.details() or "")
        assert refused.target_path not in plugin.node.mounts()

        allowed = plugin.publish("team-b", "anchored", uid_b, good, "pod-b2")
        stub.NodePublishVolume(allowed, timeout=30)
        assert plugin.node.mounts()[allowed.target_path].split(",")[0] == "ro"
        assert len(plugin.hub.server.fetches()) == fetched  # proven by a listing, no download
        for request in (held, allowed):
            stub.NodeUnpublishVolume(
                pb.NodeUnpublishVolumeRequest(
                    volume_id=request.volume_id, target_path=request.target_path
                ),
                timeout=30,
            )
