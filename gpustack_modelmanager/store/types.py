"""What the CSI node service asks the store and what it answers (docs/node-store.md,
"Materialization")."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol

from gpustack_render.api.nodestore import NodeModelStoreStatus


@dataclass(frozen=True)
class TreeRequest:
    """One tree: the artifact's resolved digest and where its files come from."""

    #: ``sha256:<64 hex>``, the artifact's ``status.resolved.manifestDigest``.
    digest: str
    hub: Literal["huggingFace", "modelScope"]
    repository: str
    #: ``status.resolved.revision``: the commit.
    commit: str
    #: The Settings ``huggingface_endpoint`` / ``modelscope_endpoint``.
    endpoint: str
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    #: From the volume's ``nodePublishSecretRef`` (key ``token``); ``None``: no token at all.
    token: str | None = None
    size_bytes: int | None = None
    #: For the record, e.g. ``huggingFace:org/model@<commit>``.
    source: str = ""
    #: The namespace of the Pod the tree is for (docs/node-store.md, "Who may mount what");
    #: ``None``: not on behalf of a Pod (the store's own tests, the benchmark), no access rule.
    namespace: str | None = None
    #: The artifact's ``status.resolved.digestSource``: ``Hub`` (the controller listed the
    #: repository with the namespace's token and got the digest) or ``Expected`` (the anchor).
    digest_source: str = "Expected"


@dataclass(frozen=True)
class TreeReady:
    """The published, verified tree (read-only)."""

    path: Path


@dataclass(frozen=True)
class TreePending:
    """The one download of the digest runs."""

    downloaded_bytes: int
    size_bytes: int | None


@dataclass(frozen=True)
class TreeFailed:
    """The download failed (or the request is unusable); no new attempt before ``retry_time``."""

    reason: str
    message: str
    retry_time: datetime


@dataclass(frozen=True)
class TreeDenied:
    """The request's namespace has not shown it may read the digest's repository
    (docs/node-store.md, "Who may mount what"): ``retry`` when the hub could not be asked (the
    next request asks again), else the hub refused."""

    reason: str
    message: str
    retry: bool


TreeAnswer = TreeReady | TreePending | TreeFailed | TreeDenied


class RecordWriter(Protocol):
    """Writes the node's ``NodeModelStore`` status (the Kubernetes one is
    :class:`gpustack_modelmanager.store.records.KubeRecordWriter`)."""

    async def write(self, status: NodeModelStoreStatus) -> None: ...
