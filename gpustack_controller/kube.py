"""The controller's door to the API server: the shared client with the controller's settings.

:class:`Kube` is :class:`gpustack_kube.client.Kube` (plain JSON dicts; create, replace, delete
with a uid precondition, JSON merge patch, forced server-side apply; raw watch streams with
bookmarks and an inactivity watchdog, re-listing left to the informer in ``watches.py``) with
the controller's user agent and a pool large enough for every watch to hold a connection while
reconciles write. The REST coordinates of the kinds it touches are the library's
(:mod:`gpustack_render.schema.resources`), re-exported here with the client's names so the
controller's modules import one place.
"""

from __future__ import annotations

from typing import Final, Self

from gpustack_kube import client
from gpustack_kube.client import APPLY_PATCH, JSON, MERGE_PATCH, ApiError, WatchEvent
from gpustack_kube.config import ClusterConfigError, in_cluster_namespace
from gpustack_render.schema.resources import (
    ADMISSION_CHECKS,
    BACKENDS,
    BINDINGS,
    CLUSTER_QUEUES,
    CONFIGMAPS,
    CSI_DRIVERS,
    EVENTS,
    INSTANCE_TYPES,
    LEASES,
    LOCAL_QUEUES,
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    NODE_MODEL_STORES,
    NODES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    POOLS,
    SCALERS,
    SECRETS,
    SERVICES,
    STORAGE_CLASSES,
    WORKLOADS,
    Resource,
)

__all__ = [
    "ADMISSION_CHECKS",
    "APPLY_PATCH",
    "BACKENDS",
    "BINDINGS",
    "CLUSTER_QUEUES",
    "CONFIGMAPS",
    "CSI_DRIVERS",
    "EVENTS",
    "INSTANCE_TYPES",
    "JSON",
    "LEASES",
    "LOCAL_QUEUES",
    "MERGE_PATCH",
    "MODEL_ARTIFACTS",
    "MODEL_DEPLOYMENTS",
    "NODES",
    "NODE_MODEL_STORES",
    "PERSISTENT_VOLUMES",
    "PERSISTENT_VOLUME_CLAIMS",
    "PODS",
    "POOLS",
    "SCALERS",
    "SECRETS",
    "SERVICES",
    "STORAGE_CLASSES",
    "USER_AGENT",
    "WORKLOADS",
    "ApiError",
    "ClusterConfigError",
    "Kube",
    "Resource",
    "WatchEvent",
    "in_cluster_namespace",
]

#: ``User-Agent`` of the controller's requests (shows in the API server's audit log).
USER_AGENT: Final = "gpustack-controller"


class Kube(client.Kube):
    """The shared client, connected the controller's way."""

    @classmethod
    async def connect(
        cls,
        *,
        kubeconfig: str | None = None,
        user_agent: str = USER_AGENT,
        request_timeout: float = 30.0,
        # Watches each hold a connection for minutes; reconciles create Pods concurrently.
        max_connections: int = 256,
        # client-go's default: an API server that asks to be retried later (429 while it
        # starts, or under priority and fairness) is not a failed start or a failed pass.
        retry_after_attempts: int = 10,
    ) -> Self:
        """A client from ``kubeconfig``, else the in-cluster service account, else the default
        kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``); raises
        :class:`ClusterConfigError`."""
        return await super().connect(
            kubeconfig=kubeconfig,
            user_agent=user_agent,
            request_timeout=request_timeout,
            max_connections=max_connections,
            retry_after_attempts=retry_after_attempts,
        )
