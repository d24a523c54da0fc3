"""The Kueue LocalQueues a deployment needs (D16; docs/contract/controller.md §10).

One per distinct InstanceType entrance its roles use, named after the entrance in the
deployment's namespace, pointing at the ClusterQueue of the same name. Several deployments share
one, so it carries no owner reference; the controller creates it when missing and never deletes
it. The controller's own namespace gets none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from gpustack_render.core.labels import MANAGED_BY, MANAGED_BY_VALUE
from gpustack_render.schema.kinds import KUEUE_API_VERSION

LOCAL_QUEUE_KIND: Final = "LocalQueue"


def local_queue(entrance: str, *, namespace: str) -> dict[str, Any]:
    """The LocalQueue ``entrance`` in ``namespace``, feeding ClusterQueue ``entrance``."""
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": LOCAL_QUEUE_KIND,
        "metadata": {
            "name": entrance,
            "namespace": namespace,
            "labels": {MANAGED_BY: MANAGED_BY_VALUE},
        },
        "spec": {"clusterQueue": entrance},
    }


def local_queues(
    entrances: Iterable[str], *, namespace: str, system_namespace: str
) -> list[dict[str, Any]]:
    """Every LocalQueue the deployment needs, sorted by name; none in the system namespace."""
    if namespace == system_namespace:
        return []
    return [local_queue(e, namespace=namespace) for e in sorted(set(entrances)) if e]
