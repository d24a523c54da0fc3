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
from typing import Any

from gpustack_render.core import jsonview
from gpustack_render.core.ownerrefs import OwnedConflict


def cluster_queue_of(local_queue: Mapping[str, Any]) -> str:
    """The ClusterQueue a LocalQueue object feeds (``spec.clusterQueue``); ``""`` when it names
    none."""
    name = jsonview.view(local_queue.get("spec")).get("clusterQueue")
    return name if isinstance(name, str) else ""


def queue_conflict(wanted: Mapping[str, Any], stored: Mapping[str, Any]) -> OwnedConflict | None:
    """The conflict between the rendered LocalQueue ``wanted`` and the one the API server holds
    under its name, or ``None`` when the stored one feeds the same ClusterQueue."""
    want = cluster_queue_of(wanted)
    found = cluster_queue_of(stored)
    if found == want:
        return None
    meta = jsonview.view(wanted.get("metadata"))
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    feeds = f"ClusterQueue {found}" if found else "no ClusterQueue"
    return OwnedConflict(
        "LocalQueue",
        namespace,
        name,
        detail=(
            f"LocalQueue {namespace}/{name} feeds {feeds}, not {want}; the controller never "
            "changes an existing LocalQueue (spec.clusterQueue is immutable) and creates no Pod "
            f"of a role using it: delete it, and the controller recreates it pointing at "
            f"ClusterQueue {want}"
        ),
    )
