"""The CSI Node service: publish a resolved artifact's verified tree read-only at a Pod's target
path, and take it away again (docs/node-store.md, "The CSI node plugin").

NodePublishVolume, for an inline ephemeral volume of ``model.csi.gpustack.ai``:

1. the request's shape (volume id, target path, a mount capability): else ``InvalidArgument``;
2. the volume context (:func:`gpustack_render.weights.mounts.mount_attributes`): else
   ``InvalidArgument`` naming the key;
3. the ``ModelArtifact`` named by the volume, read in the Pod's own namespace, and the pure rule
   (:func:`gpustack_render.weights.mounts.authorize`): else ``PermissionDenied`` naming what did
   not match;
4. the node store (``acquire``): a published tree is bind-mounted read-only at the target and
   referenced; a tree still materializing answers ``Aborted`` with the progress (kubelet retries);
   a failed one answers ``Unavailable`` with the reason and the retry time; a namespace whose
   access to the digest the store could not prove (an anchored artifact) answers
   ``PermissionDenied``, or ``Unavailable`` when the hub could not be asked.

NodeUnpublishVolume unmounts, removes the target directory and releases the reference; a missing
target is success. Stage/unstage, stats and expansion are not offered.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import grpc

from gpustack_modelmanager.csi import mounter
from gpustack_modelmanager.csi.proto import pb, services
from gpustack_modelmanager.csi.storeapi import (
    ModelStore,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)
from gpustack_render.core.settings import Settings
from gpustack_render.weights.mounts import (
    AttributeProblem,
    MountGrant,
    MountRefusal,
    authorize,
    mount_attributes,
)

log = logging.getLogger(__name__)

#: Unmounts tried on one target before NodeUnpublishVolume gives up (kubelet retries).
MAX_STACKED_MOUNTS = 8
#: Reads a ModelArtifact by (namespace, name): the object, or ``None`` when there is none.
ArtifactReader = Callable[[str, str], Awaitable[Mapping[str, Any] | None]]


class Mounts(Protocol):
    """How targets are mounted (the kernel's calls, :mod:`gpustack_modelmanager.csi.mounter`)."""

    def mounted(self, target: Path) -> str | None: ...

    def bind_read_only(self, source: Path, target: Path) -> None: ...

    def unmount(self, target: Path) -> None: ...


class KernelMounts:
    """:class:`Mounts` through ``mount(2)`` and ``/proc/self/mountinfo``."""

    def mounted(self, target: Path) -> str | None:
        return mounter.mounted(target)

    def bind_read_only(self, source: Path, target: Path) -> None:
        mounter.bind_read_only(source, target)

    def unmount(self, target: Path) -> None:
        mounter.unmount(target)


class RpcError(Exception):
    """An RPC's error answer."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def percent(done: int, total: int | None) -> str:
    """``12 %`` of a download, or ``size unknown``."""
    if not total:
        return "size unknown"
    return f"{min(100, done * 100 // total)} %"


def tree_request(grant: MountGrant, settings: Settings, secrets: Mapping[str, str]) -> TreeRequest:
    """What the store is asked for: the grant, the hub endpoint Setting, and the token kubelet
    read from the volume's ``nodePublishSecretRef`` (key ``token``; blank is none)."""
    endpoint = (
        settings.huggingface_endpoint
        if grant.hub == "huggingFace"
        else settings.modelscope_endpoint
    )
    token = (secrets.get("token") or "").strip() or None
    return TreeRequest(
        digest=grant.digest,
        hub=grant.hub,
        repository=grant.repository,
        commit=grant.commit,
        endpoint=endpoint,
        allow_patterns=grant.allow_patterns,
        ignore_patterns=grant.ignore_patterns,
        token=token,
        size_bytes=grant.size_bytes,
        source=grant.source,
        namespace=grant.namespace,
        digest_source=grant.digest_source,
    )


class NodeService(services.NodeServicer):  # type: ignore[misc]
    """``csi.v1.Node`` for inline ephemeral model volumes."""

    def __init__(
        self,
        *,
        node_name: str,
        store: ModelStore,
        read_artifact: ArtifactReader,
        settings: Callable[[], Settings],
        mounts: Mounts | None = None,
    ) -> None:
        self.node_name = node_name
        self.store = store
        self.read_artifact = read_artifact
        self.settings = settings
        self.mounts: Mounts = mounts or KernelMounts()
        self._locks: dict[str, asyncio.Lock] = {}

    # ---- the RPCs -----------------------------------------------------------------------------

    async def NodeGetCapabilities(self, request: Any, context: Any) -> Any:  # noqa: N802
        # None of the optional RPCs: no staging (nothing to attach), no stats, no expansion.
        return pb.NodeGetCapabilitiesResponse(capabilities=[])

    async def NodeGetInfo(self, request: Any, context: Any) -> Any:  # noqa: N802
        return pb.NodeGetInfoResponse(node_id=self.node_name)

    async def NodePublishVolume(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            await self.publish(request)
        except RpcError as failure:
            await context.abort(failure.code, failure.message)
        return pb.NodePublishVolumeResponse()

    async def NodeUnpublishVolume(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            await self.unpublish(request)
        except RpcError as failure:
            await context.abort(failure.code, failure.message)
        return pb.NodeUnpublishVolumeResponse()

    # ---- publish --------------------------------------------------------------------------------

    async def publish(self, request: Any) -> None:
        """NodePublishVolume; raises :class:`RpcError` with the answer's code."""
        volume_id = str(request.volume_id)
        target = str(request.target_path)
        check_shape(volume_id, target, request)
        attrs = mount_attributes(dict(request.volume_context))
        if isinstance(attrs, AttributeProblem):
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, attrs.message)
        try:
            raw = await self.read_artifact(attrs.pod_namespace, attrs.artifact)
        except Exception as exc:  # any failure to read is "try again", never a grant
            raise RpcError(
                grpc.StatusCode.UNAVAILABLE,
                f"cannot read ModelArtifact {attrs.pod_namespace}/{attrs.artifact}: {exc}",
            ) from exc
        grant = authorize(attrs, raw)
        if isinstance(grant, MountRefusal):
            log.warning(
                "refused volume %s of Pod %s/%s: %s: %s",
                volume_id,
                attrs.pod_namespace,
                attrs.pod_name,
                grant.reason,
                grant.message,
            )
            raise RpcError(grpc.StatusCode.PERMISSION_DENIED, f"{grant.reason}: {grant.message}")
        async with self._lock(target):
            await self._publish_granted(grant, Path(target), dict(request.secrets))
        log.info(
            "published %s for Pod %s/%s at %s",
            grant.digest,
            attrs.pod_namespace,
            attrs.pod_name,
            target,
        )

    async def _publish_granted(
        self, grant: MountGrant, target: Path, secrets: Mapping[str, str]
    ) -> None:
        answer = await self.store.acquire(tree_request(grant, self.settings(), secrets))
        if isinstance(answer, TreePending):
            size = answer.size_bytes if answer.size_bytes is not None else grant.size_bytes
            raise RpcError(
                grpc.StatusCode.ABORTED,
                f"Materializing: {grant.digest} is downloading on node {self.node_name}: "
                f"{answer.downloaded_bytes}/{size if size is not None else '?'} bytes "
                f"({percent(answer.downloaded_bytes, size)}); kubelet retries",
            )
        if isinstance(answer, TreeFailed):
            raise RpcError(
                grpc.StatusCode.UNAVAILABLE,
                f"MaterializationFailed: {grant.digest} on node {self.node_name}: "
                f"{answer.reason}: {answer.message}; retried after "
                f"{answer.retry_time.isoformat()}",
            )
        if isinstance(answer, TreeDenied):
            # The Pod's namespace has not shown it may read the repository (an anchored
            # artifact, docs/node-store.md "Who may mount what"); a hub outage is retried.
            raise RpcError(
                grpc.StatusCode.UNAVAILABLE if answer.retry else grpc.StatusCode.PERMISSION_DENIED,
                f"{answer.reason}: {answer.message}",
            )
        if not isinstance(answer, TreeReady):
            raise RpcError(grpc.StatusCode.INTERNAL, f"the node store answered {answer!r}")
        await asyncio.to_thread(self._mount, answer.path, target)
        await self.store.reference(grant.digest, str(target))

    def _mount(self, source: Path, target: Path) -> None:
        try:
            options = self.mounts.mounted(target)
            if options is not None:
                if "ro" not in options.split(","):
                    raise RpcError(
                        grpc.StatusCode.FAILED_PRECONDITION,
                        f"{target} is already mounted read-write ({options})",
                    )
                return  # published before: the same volume's retry (the target is per volume)
            target.mkdir(mode=0o750, exist_ok=True)
            self.mounts.bind_read_only(source, target)
        except OSError as exc:
            raise RpcError(grpc.StatusCode.INTERNAL, f"mounting {target}: {exc}") from exc

    # ---- unpublish ------------------------------------------------------------------------------

    async def unpublish(self, request: Any) -> None:
        """NodeUnpublishVolume (idempotent); raises :class:`RpcError` with the answer's code."""
        if not request.volume_id:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "volume_id is required")
        if not request.target_path:
            raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "target_path is required")
        target = Path(str(request.target_path))
        async with self._lock(str(target)):
            await asyncio.to_thread(self._unmount, target)
            await self.store.release(str(target))
        self._locks.pop(str(target), None)
        log.info("unpublished %s", target)

    def _unmount(self, target: Path) -> None:
        try:
            # Mounts stacked on the target (a retried publish racing a restart) go one by one.
            for _ in range(MAX_STACKED_MOUNTS):
                if self.mounts.mounted(target) is None:
                    break
                self.mounts.unmount(target)
            else:
                raise RpcError(
                    grpc.StatusCode.INTERNAL, f"{target} is still mounted after unmounting"
                )
            os.rmdir(target)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise RpcError(grpc.StatusCode.INTERNAL, f"unmounting {target}: {exc}") from exc

    def _lock(self, target: str) -> asyncio.Lock:
        return self._locks.setdefault(target, asyncio.Lock())


def check_shape(volume_id: str, target: str, request: Any) -> None:
    """The fields every NodePublishVolume needs (CSI spec: ``InvalidArgument`` when missing)."""
    if not volume_id:
        raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "volume_id is required")
    if not target:
        raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "target_path is required")
    if not request.HasField("volume_capability"):
        raise RpcError(grpc.StatusCode.INVALID_ARGUMENT, "volume_capability is required")
    if request.volume_capability.HasField("block"):
        raise RpcError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "volume_capability.block: the driver publishes filesystem (mount) volumes only",
        )
    if request.staging_target_path:
        raise RpcError(
            grpc.StatusCode.INVALID_ARGUMENT,
            "staging_target_path is set, but the driver does not offer STAGE_UNSTAGE_VOLUME",
        )
