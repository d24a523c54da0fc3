"""The caches a pass reads from, and the kinds it keeps on the owned-object path over them.

:class:`Caches` holds the informers (the controller fills them from its watches); every read goes
through the one cache rule (``gpustack_kube/cachedread.py``). :class:`OwnedKinds` is each owned
kind with its policy (``gpustack_render/reconcile/owned.py``), resource, informer and how a
deployment's stored objects of the kind are found: adding a kind is one entry here and one
``sync`` call in the pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from gpustack_controller.kube import (
    LOCAL_QUEUES,
    SCALERS,
    SERVICES,
)
from gpustack_controller.observe import SERVICES_BY_OWNER
from gpustack_controller.owned import OwnedKind, instance_candidates
from gpustack_controller.watches import Informer
from gpustack_kube.cachedread import CachedReader
from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.reconcile.owned import (
    LOCAL_QUEUE_POLICY,
    ROUTER_KINDS,
    ROUTER_POLICIES,
    SCALER_POLICY,
    SERVICE_POLICY,
    Owner,
)
from gpustack_render.schema.resources import READ_RESOURCES, ROUTER_RESOURCES

log = logging.getLogger(__name__)

#: The index of the NodeModelStores' informer by the digests each lists, and of the
#: ModelArtifacts' informer by their resolved manifest digest (hub sources).
NODE_STORES_BY_DIGEST = "digest"
ARTIFACTS_BY_DIGEST = "manifest-digest"


@dataclass
class Caches:
    """The informers a pass reads from (by the one cache rule: ``gpustack_kube/cachedread.py``)."""

    deployments: Informer
    pods: Informer
    services: Informer
    workloads: Informer
    bindings: Informer
    pools: Informer
    backends: Informer
    instance_types: Informer
    #: ModelDeploymentScalers (D27); the count of an autoscaled role is read here.
    scalers: Informer | None = None
    #: LocalQueues (optional: without it each pass GETs the ones it needs).
    local_queues: Informer | None = None
    #: The router's objects by kind (D26); a kind without one is read live and never pruned.
    routers: dict[str, Informer] = field(default_factory=dict)
    #: The weight inputs (D28): ModelArtifacts and the storage kinds a delivery reads. A kind
    #: without an informer is read live.
    artifacts: Informer | None = None
    claims: Informer | None = None
    volumes: Informer | None = None
    storage_classes: Informer | None = None
    csi_drivers: Informer | None = None
    #: NodeModelStores (issue 34), indexed by the digests they list (NODE_STORES_BY_DIGEST);
    #: without it a node-delivered Pod has no node preference and no node state.
    node_stores: Informer | None = None

    def of(self, kind: type[InputObject]) -> Informer | None:
        """The informer of an input kind (``None``: read it live)."""
        by_kind: dict[type[InputObject], Informer | None] = {
            InstanceType: self.instance_types,
            KVCachePoolBinding: self.bindings,
            KVCachePool: self.pools,
            KVCacheBackend: self.backends,
            ModelArtifact: self.artifacts,
            PersistentVolumeClaim: self.claims,
            PersistentVolume: self.volumes,
            StorageClass: self.storage_classes,
            CSIDriver: self.csi_drivers,
            NodeModelStore: self.node_stores,
        }
        return by_kind[kind]


@dataclass
class OwnedKinds:
    """Every kind a pass keeps beside a deployment, as the owned-object path takes them."""

    local_queues: OwnedKind
    scalers: OwnedKind
    services: OwnedKind
    #: The router's kinds, in the order they are applied.
    router: dict[str, OwnedKind]

    @classmethod
    def of(cls, caches: Caches) -> OwnedKinds:
        def services(owner: Owner) -> list[dict[str, Any]]:
            # Only this deployment's: the ones it controls are the only ones it may prune.
            return caches.services.by_index(SERVICES_BY_OWNER, owner.uid)

        router = {
            kind: OwnedKind(
                ROUTER_POLICIES[kind],
                ROUTER_RESOURCES[kind],
                caches.routers.get(kind),
                instance_candidates(caches.routers.get(kind)),
            )
            for kind in ROUTER_KINDS
        }
        return cls(
            local_queues=OwnedKind(LOCAL_QUEUE_POLICY, LOCAL_QUEUES, caches.local_queues),
            scalers=OwnedKind(SCALER_POLICY, SCALERS, caches.scalers),
            services=OwnedKind(SERVICE_POLICY, SERVICES, caches.services, services),
            router=router,
        )


class InputReader:
    """Reads the objects a render reads, round by round as the library's input graph finds
    them, by the one cache rule; logs each unreadable one once per stored version (an Event
    names it on each deployment that reads it)."""

    def __init__(self, reader: CachedReader, caches: Caches) -> None:
        self.reader = reader
        self.caches = caches
        # (kind, key, resourceVersion) of each unreadable input already logged.
        self._logged: set[tuple[str, str, str]] = set()

    async def read(self, md: ModelDeployment) -> InputGraph:
        graph = InputGraph(md)
        while pending := graph.pending():
            for read in pending:
                graph.answer(read, await self._fetch(read))
        stores = self.caches.node_stores
        if stores is not None:  # the nodes holding each digest: from the index, never a list
            for digest in graph.node_store_digests():
                graph.answer_node_stores(stores.by_index(NODE_STORES_BY_DIGEST, digest))
        for bad in graph.unreadable:
            read = bad.read
            key = f"{read.namespace}/{read.name}" if read.namespace else read.name
            seen = (read.kind.__name__, key, bad.resource_version)
            if seen not in self._logged:
                self._logged.add(seen)
                log.error(
                    "%s %s is unreadable: %s", read.kind.__name__, key, bad.failure.reason[:512]
                )
        return graph

    async def _fetch(self, read: Read) -> dict[str, Any] | None:
        informer = self.caches.of(read.kind)
        resource = informer.resource if informer is not None else READ_RESOURCES[read.kind.__name__]
        return await self.reader.get(
            resource,
            read.name,
            read.namespace or None,
            informer=informer,
            # The node plugin's driver is usually absent: a synced cache's miss answers.
            authoritative=read.kind is CSIDriver,
        )
