"""The node store as the CSI service sees it (docs/node-store.md).

The request and answer types are the store's own (``gpustack_modelmanager.store``), re-exported
here: the service matches the store's answers by type. ``ModelStore`` is the part of the store's
interface the service calls, as a ``Protocol``, so the service's unit tests can hand it a test
double of our store (tests/support/csi.py) while the plugin runs the real one.
"""

from __future__ import annotations

from typing import Protocol

from gpustack_modelmanager.store.types import (
    TreeAnswer,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)

__all__ = [
    "ModelStore",
    "TreeAnswer",
    "TreeDenied",
    "TreeFailed",
    "TreePending",
    "TreeReady",
    "TreeRequest",
]


class ModelStore(Protocol):
    """What NodePublishVolume and NodeUnpublishVolume call
    (``gpustack_modelmanager.store.ModelStore`` is the real one)."""

    async def acquire(self, request: TreeRequest) -> TreeAnswer: ...

    async def reference(self, digest: str, target: str) -> None: ...

    async def release(self, target: str) -> None: ...

    async def close(self) -> None: ...
