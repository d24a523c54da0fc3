"""Test material for the CSI node plugin (gpustack_modelmanager/csi).

- :func:`artifact_object` and :func:`volume_context`: a resolved hub artifact as the API server
  returns it, and the volume context kubelet sends for a Pod naming it (the renderer's three
  attributes merged with kubelet's podInfoOnMount keys, kubelet's
  pkg/volume/csi/csi_util.go getPodInfoAttrs).
- :class:`DirectoryTreeStore`: a TEST DOUBLE OF OUR OWN node store
  (``gpustack_modelmanager.store.ModelStore``), not of any external component: it serves
  pre-built trees from a directory, answers ``TreePending`` / ``TreeFailed`` for the digests it
  is told to, and records the references, so the CSI service can be tested before the real
  store is merged.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from gpustack_modelmanager.csi.storeapi import (
    TreeAnswer,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)
from gpustack_render.weights.mounts import (
    ATTR_ARTIFACT,
    ATTR_ARTIFACT_UID,
    ATTR_MANIFEST_DIGEST,
    EPHEMERAL,
    POD_NAME,
    POD_NAMESPACE,
    POD_UID,
)

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def artifact_object(
    namespace: str,
    name: str,
    *,
    uid: str,
    digest: str,
    source: str = "huggingFace",
    resolved: str = "True",
    secret: str | None = None,
    digest_source: str = "Hub",
    revision: str = "main",
) -> dict[str, Any]:
    """A ModelArtifact as read from the API server, resolved to ``digest`` (``digest_source``
    ``Expected``: an anchored artifact, resolved without a commit)."""
    hub: dict[str, Any] = {"repository": "org/model", "revision": revision}
    if secret:
        hub["secretRef"] = {"name": secret}
    spec_source: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": "weights"}}
        if source == "persistentVolumeClaim"
        else {source: hub}
    )
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelArtifact",
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "generation": 1},
        "spec": {"source": spec_source, "ignorePatterns": ["*.bin"]},
        "status": {
            "observedGeneration": 1,
            "resolved": {
                **({"revision": COMMIT} if digest_source == "Hub" else {}),
                "manifestDigest": digest,
                "digestSource": digest_source,
                "fileCount": 2,
                "sizeBytes": 1000,
            },
            "conditions": [
                {"type": "Resolved", "status": resolved, "reason": "Resolved", "message": ""}
            ],
        },
    }


def volume_context(
    *,
    artifact: str,
    uid: str,
    digest: str,
    pod_namespace: str,
    pod_name: str = "engine-0",
    pod_uid: str = "pod-uid-0",
) -> dict[str, str]:
    """The volume context kubelet sends for an inline volume rendered for ``artifact``."""
    return {
        ATTR_ARTIFACT: artifact,
        ATTR_ARTIFACT_UID: uid,
        ATTR_MANIFEST_DIGEST: digest,
        POD_NAMESPACE: pod_namespace,
        POD_NAME: pod_name,
        POD_UID: pod_uid,
        "csi.storage.k8s.io/serviceAccount.name": "default",
        EPHEMERAL: "true",
    }


class DirectoryTreeStore:
    """Test double of OUR node store: trees under ``root/<hex>`` are Ready; ``pending``,
    ``failed`` and ``denied`` digests answer so; every call is recorded."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.pending: dict[str, TreePending] = {}
        self.failed: dict[str, TreeFailed] = {}
        self.denied: dict[str, TreeDenied] = {}
        self.requests: list[TreeRequest] = []
        self.references: dict[str, str] = {}
        self.released: list[str] = []

    def add_tree(self, digest: str, files: dict[str, str]) -> Path:
        tree = self.root / digest.removeprefix("sha256:")
        for rel, text in files.items():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            (tree / rel).write_text(text)
        return tree

    def fail(self, digest: str, reason: str, message: str) -> None:
        retry = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=1)
        self.failed[digest] = TreeFailed(reason=reason, message=message, retry_time=retry)

    async def acquire(self, request: TreeRequest) -> TreeAnswer:
        self.requests.append(request)
        if request.digest in self.denied:
            return self.denied[request.digest]
        if request.digest in self.failed:
            return self.failed[request.digest]
        if request.digest in self.pending:
            return self.pending[request.digest]
        tree = self.root / request.digest.removeprefix("sha256:")
        if tree.is_dir():
            return TreeReady(path=tree)
        return TreePending(downloaded_bytes=0, size_bytes=request.size_bytes)

    async def reference(self, digest: str, target: str) -> None:
        self.references[target] = digest

    async def release(self, target: str) -> None:
        self.references.pop(target, None)
        self.released.append(target)

    async def close(self) -> None:
        return None
