"""The LocalQueues a deployment needs, as the controller finds them (docs/contract/controller.md
§10; D16).

The controller creates a missing LocalQueue and never patches an existing one:
``spec.clusterQueue`` is immutable, and a queue an administrator created may be theirs. One that
feeds another ClusterQueue than the entrance of the same name is a conflict: reported in status
and as an event, and no Pod of a role using it is created (it would be admitted against another
ClusterQueue's quota). The controller looks again on later passes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview


@dataclass(frozen=True, slots=True)
class QueueConflict:
    """LocalQueue ``namespace/name`` feeds ClusterQueue ``found``, not ``wanted``."""

    namespace: str
    name: str
    wanted: str
    found: str

    @property
    def message(self) -> str:
        found = f"ClusterQueue {self.found}" if self.found else "no ClusterQueue"
        return (
            f"LocalQueue {self.namespace}/{self.name} feeds {found}, not {self.wanted}; the "
            "controller never changes an existing LocalQueue (spec.clusterQueue is immutable) "
            f"and creates no Pod of a role using it: delete it, and the controller recreates "
            f"it pointing at ClusterQueue {self.wanted}"
        )


def cluster_queue_of(local_queue: Mapping[str, Any]) -> str:
    """The ClusterQueue a LocalQueue object feeds (``spec.clusterQueue``); ``""`` when it names
    none."""
    name = jsonview.view(local_queue.get("spec")).get("clusterQueue")
    return name if isinstance(name, str) else ""


def queue_conflict(wanted: Mapping[str, Any], stored: Mapping[str, Any]) -> QueueConflict | None:
    """The conflict between the rendered LocalQueue ``wanted`` and the one the API server holds
    under its name, or ``None`` when the stored one feeds the same ClusterQueue."""
    want = cluster_queue_of(wanted)
    found = cluster_queue_of(stored)
    if found == want:
        return None
    meta = jsonview.view(wanted.get("metadata"))
    return QueueConflict(
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        wanted=want,
        found=found,
    )
