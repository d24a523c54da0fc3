"""The CSI Identity and Node services over a real gRPC unix socket (grpc.aio), with the test
double of our node store (tests/support/csi.py). What happens before a mount is tested here:
the request's shape, the volume context, the authorization and the store's Pending/Failed
answers; the real read-only bind mounts are in tests/integration/test_csi_plugin.py."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import pytest_asyncio
from support.csi import DirectoryTreeStore, artifact_object, digest_of, volume_context

from gpustack_modelmanager.csi import server
from gpustack_modelmanager.csi.identity import IdentityService
from gpustack_modelmanager.csi.node import MAX_STACKED_MOUNTS, NodeService, RpcError
from gpustack_modelmanager.csi.proto import pb, services
from gpustack_modelmanager.csi.storeapi import TreeDenied, TreePending
from gpustack_render.core.settings import Settings
from gpustack_render.weights.delivery import CSI_DRIVER

DIGEST = digest_of("weights")
SETTINGS = Settings(huggingface_endpoint="http://127.0.0.1:9/hub")


@dataclass
class Plugin:
    identity: Any
    node: Any
    store: DirectoryTreeStore
    artifacts: dict[tuple[str, str], dict[str, Any]]
    root: Path


@pytest_asyncio.fixture(loop_scope="session")
async def plugin(tmp_path: Path) -> AsyncIterator[Plugin]:
    store = DirectoryTreeStore(tmp_path / "store")
    artifacts: dict[tuple[str, str], dict[str, Any]] = {}

    async def read(namespace: str, name: str) -> Mapping[str, Any] | None:
        if name == "explodes":
            raise ConnectionError("connection refused")
        return artifacts.get((namespace, name))

    node = NodeService(
        node_name="node-a", store=store, read_artifact=read, settings=lambda: SETTINGS
    )
    sock = tmp_path / "csi.sock"
    srv = await server.start(f"unix://{sock}", IdentityService(), node)
    channel = grpc.aio.insecure_channel(f"unix://{sock}")
    try:
        yield Plugin(
            services.IdentityStub(channel), services.NodeStub(channel), store, artifacts, tmp_path
        )
    finally:
        await channel.close()
        await srv.stop(grace=None)


def _publish(target: Path, context: dict[str, str], **kw: Any) -> Any:
    request = pb.NodePublishVolumeRequest(
        volume_id="csi-0123",
        target_path=str(target),
        readonly=True,
        volume_context=context,
        **kw,
    )
    request.volume_capability.access_mode.mode = (
        pb.VolumeCapability.AccessMode.Mode.SINGLE_NODE_WRITER
    )
    request.volume_capability.mount.SetInParent()
    return request


async def _code(call: Any) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    return err.value.code(), err.value.details() or ""


def _context(namespace: str = "team-a", **kw: str) -> dict[str, str]:
    return volume_context(
        artifact=kw.get("artifact", "llama"),
        uid=kw.get("uid", "uid-1"),
        digest=kw.get("digest", DIGEST),
        pod_namespace=namespace,
    )


async def test_identity(plugin: Plugin) -> None:
    info = await plugin.identity.GetPluginInfo(pb.GetPluginInfoRequest())
    assert info.name == CSI_DRIVER and info.vendor_version
    caps = await plugin.identity.GetPluginCapabilities(pb.GetPluginCapabilitiesRequest())
    assert list(caps.capabilities) == []  # no Controller service
    probe = await plugin.identity.Probe(pb.ProbeRequest())
    assert probe.ready.value is True


async def test_node_info_and_capabilities(plugin: Plugin) -> None:
    info = await plugin.node.NodeGetInfo(pb.NodeGetInfoRequest())
    assert info.node_id == "node-a"
    caps = await plugin.node.NodeGetCapabilities(pb.NodeGetCapabilitiesRequest())
    assert list(caps.capabilities) == []  # no staging


async def test_request_shape(plugin: Plugin) -> None:
    target = plugin.root / "t"
    bare = pb.NodePublishVolumeRequest(volume_id="v", target_path=str(target))
    code, msg = await _code(plugin.node.NodePublishVolume(bare))
    assert (code, msg) == (grpc.StatusCode.INVALID_ARGUMENT, "volume_capability is required")
    block = _publish(target, _context())
    block.volume_capability.block.SetInParent()
    code, msg = await _code(plugin.node.NodePublishVolume(block))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "block" in msg
    code, msg = await _code(plugin.node.NodePublishVolume(_publish(target, {})))
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "volumeAttributes.artifact" in msg
    code, _ = await _code(plugin.node.NodeUnpublishVolume(pb.NodeUnpublishVolumeRequest()))
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert plugin.store.requests == []


async def test_refusals_are_permission_denied(plugin: Plugin) -> None:
    plugin.artifacts[("team-a", "llama")] = artifact_object(
        "team-a", "llama", uid="uid-1", digest=DIGEST
    )
    target = plugin.root / "t"
    cases = {
        "team-b": "ArtifactNotFound: ModelArtifact team-b/llama does not exist",
        "uid": "UIDMismatch",
        "digest": "DigestMismatch",
    }
    contexts = {
        "team-b": _context("team-b"),
        "uid": _context(uid="uid-2"),
        "digest": _context(digest=digest_of("other")),
    }
    for case, context in contexts.items():
        code, msg = await _code(plugin.node.NodePublishVolume(_publish(target, context)))
        assert code == grpc.StatusCode.PERMISSION_DENIED, case
        assert cases[case] in msg, msg
    assert plugin.store.requests == []  # nothing refused reaches the store
    assert not target.exists()


async def test_unreadable_api_is_unavailable(plugin: Plugin) -> None:
    code, msg = await _code(
        plugin.node.NodePublishVolume(_publish(plugin.root / "t", _context(artifact="explodes")))
    )
    assert code == grpc.StatusCode.UNAVAILABLE and "connection refused" in msg


async def test_pending_is_aborted_with_progress(plugin: Plugin) -> None:
    plugin.artifacts[("team-a", "llama")] = artifact_object(
        "team-a", "llama", uid="uid-1", digest=DIGEST, secret="hub"
    )
    plugin.store.pending[DIGEST] = TreePending(downloaded_bytes=250, size_bytes=1000)
    target = plugin.root / "t"
    request = _publish(target, _context(), secrets={"token": " hf_x \n"})
    code, msg = await _code(plugin.node.NodePublishVolume(request))
    assert code == grpc.StatusCode.ABORTED
    assert msg == (
        f"Materializing: {DIGEST} is downloading on node node-a: 250/1000 bytes (25 %); "
        "kubelet retries"
    )
    (asked,) = plugin.store.requests
    assert asked.token == "hf_x"
    assert asked.endpoint == SETTINGS.huggingface_endpoint
    assert (asked.repository, asked.ignore_patterns) == ("org/model", ("*.bin",))
    assert (asked.namespace, asked.digest_source) == ("team-a", "Hub")
    assert not target.exists()


async def test_failed_names_reason_and_retry(plugin: Plugin) -> None:
    plugin.artifacts[("team-a", "llama")] = artifact_object(
        "team-a", "llama", uid="uid-1", digest=DIGEST
    )
    plugin.store.fail(DIGEST, "DigestMismatch", "config.json: sha1 differs")
    code, msg = await _code(plugin.node.NodePublishVolume(_publish(plugin.root / "t", _context())))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert "MaterializationFailed" in msg and "DigestMismatch: config.json: sha1 differs" in msg
    assert "2026-01-01T00:01:00+00:00" in msg
    assert plugin.store.requests[0].token is None


@pytest.mark.parametrize(
    ("retry", "expected"),
    [(False, grpc.StatusCode.PERMISSION_DENIED), (True, grpc.StatusCode.UNAVAILABLE)],
)
async def test_unproven_access_is_refused(
    plugin: Plugin, retry: bool, expected: grpc.StatusCode
) -> None:
    plugin.artifacts[("team-b", "llama")] = artifact_object(
        "team-b", "llama", uid="uid-1", digest=DIGEST, digest_source="Expected"
    )
    plugin.store.denied[DIGEST] = TreeDenied("AccessRefused", "the hub refuses team-b", retry)
    target = plugin.root / "t"
    request = _publish(target, _context("team-b"))
    code, msg = await _code(plugin.node.NodePublishVolume(request))
    assert (code, msg) == (expected, "AccessRefused: the hub refuses team-b")
    (asked,) = plugin.store.requests
    assert (asked.namespace, asked.digest_source, asked.commit) == ("team-b", "Expected", "main")
    assert not target.exists()


async def test_unpublish_of_a_missing_target_is_success(plugin: Plugin) -> None:
    target = plugin.root / "never-published"
    request = pb.NodeUnpublishVolumeRequest(volume_id="csi-0123", target_path=str(target))
    await plugin.node.NodeUnpublishVolume(request)
    await plugin.node.NodeUnpublishVolume(request)
    assert plugin.store.released == [str(target), str(target)]
    # A plain directory left behind (kubelet made it, nothing was mounted) is removed.
    target.mkdir()
    await plugin.node.NodeUnpublishVolume(request)
    assert not target.exists()


class _StuckMounts:
    """A mount table that keeps reporting the target mounted (an unmount that did nothing)."""

    def __init__(self) -> None:
        self.unmounts = 0

    def mounted(self, target: Path) -> str | None:
        return "ro,relatime"

    def bind_read_only(self, source: Path, target: Path) -> None:
        raise AssertionError("not called")

    def unmount(self, target: Path) -> None:
        self.unmounts += 1


async def test_unpublish_gives_up_on_a_mount_that_stays(tmp_path: Path) -> None:
    async def read(namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    stuck = _StuckMounts()
    store = DirectoryTreeStore(tmp_path)
    node = NodeService(
        node_name="n", store=store, read_artifact=read, settings=Settings, mounts=stuck
    )
    request = pb.NodeUnpublishVolumeRequest(volume_id="v", target_path=str(tmp_path / "t"))
    with pytest.raises(RpcError) as err:
        await node.unpublish(request)
    assert err.value.code == grpc.StatusCode.INTERNAL and "still mounted" in err.value.message
    assert stuck.unmounts == MAX_STACKED_MOUNTS
    assert store.released == []  # the reference is kept while the target is mounted
