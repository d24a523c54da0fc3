"""The node's model store (docs/node-store.md, "Materialization"): each manifest digest
downloaded once per node, every byte verified while it streams, published atomically, collected
by the watermarks, and reported in the node's ``NodeModelStore``."""

from .store import ModelStore
from .types import (
    RecordWriter,
    TreeAnswer,
    TreeDenied,
    TreeFailed,
    TreePending,
    TreeReady,
    TreeRequest,
)

__all__ = [
    "ModelStore",
    "RecordWriter",
    "TreeAnswer",
    "TreeDenied",
    "TreeFailed",
    "TreePending",
    "TreeReady",
    "TreeRequest",
]
