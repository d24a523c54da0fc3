"""The node store as the CSI service sees it: the ``ModelStore`` interface of
``gpustack_modelmanager.store`` (docs/node-store.md), restated as a ``Protocol``.

The node plugin codes against this interface only. The answer and request types are the
store's: once ``gpustack_modelmanager.store`` is on the branch, this module re-exports them from
there (the classes must be the store's own, the service matches answers by type).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal, Protocol


@dataclass(frozen=True)
class TreeRequest:
    """One manifest digest's tree, and where to download it from."""

    digest: str
    hub: Literal["huggingFace", "modelScope"]
    repository: str
    commit: str
    endpoint: str
    allow_patterns: tuple[str, ...] = ()
    ignore_patterns: tuple[str, ...] = ()
    token: str | None = None
    size_bytes: int | None = None
    source: str = ""


@dataclass(frozen=True)
class TreeReady:
    """The published, verified tree (read-only)."""

    path: Path


@dataclass(frozen=True)
class TreePending:
    """The one download of the digest is running."""

    downloaded_bytes: int
    size_bytes: int | None


@dataclass(frozen=True)
class TreeFailed:
    """The last download failed; a new acquire after ``retry_time`` retries."""

    reason: str
    message: str
    retry_time: datetime


TreeAnswer = TreeReady | TreePending | TreeFailed


class ModelStore(Protocol):
    """What NodePublishVolume and NodeUnpublishVolume call."""

    async def acquire(self, request: TreeRequest) -> TreeAnswer: ...

    async def reference(self, digest: str, target: str) -> None: ...

    async def release(self, target: str) -> None: ...

    async def close(self) -> None: ...
