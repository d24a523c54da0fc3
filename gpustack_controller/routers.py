"""The router's objects in a reconcile pass (D26): watch, apply, prune, observe.

One informer per router kind, each listing only objects labelled
``app.kubernetes.io/name=model-deployment-router`` (the label every router object carries and no
engine object does), so the caches hold the routers' objects and nothing else. InferencePools
are watched only when their CRD is installed when the controller starts; without an informer a
pool is read live before it is applied and never pruned by a pass.

A pass asks the library (:func:`~gpustack_render.reconcile.routersync.sync_router`) which
rendered objects differ from the stored ones (only those are applied, by server-side apply as
the controller's field manager), which stored ones this deployment controls and no longer
renders (deleted with their uid as precondition), and which names are held by another owner
(never written: the pass fails once the rest is done). It then reads the stored router
Deployment for ``RouterReady``. A router that cannot be rendered (no image, say) is neither
written nor pruned: a router already running keeps running while status says why.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gpustack_controller.kube import ApiError, Kube, Resource
from gpustack_controller.watches import Handler, Informer
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import labels
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.routersync import (
    ObjectKey,
    RouterObservation,
    observe_router,
    sync_router,
)
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.schema.resources import DEPLOYMENTS, INFERENCE_POOLS, ROUTER_RESOURCES

log = logging.getLogger(__name__)

#: The label selector of every router informer.
ROUTER_SELECTOR = f"{labels.NAME}={labels.ROUTER_NAME_VALUE}"


@dataclass
class RouterCaches:
    """The router informers by kind (InferencePool only when its CRD was found)."""

    informers: dict[str, Informer] = field(default_factory=dict)

    @classmethod
    def create(cls, kube: Kube, handler: Handler) -> RouterCaches:
        """An informer per router kind but InferencePool (:meth:`add_pools` adds it)."""
        return cls(
            {
                kind: Informer(kube, resource, label_selector=ROUTER_SELECTOR, handlers=[handler])
                for kind, resource in ROUTER_RESOURCES.items()
                if resource is not INFERENCE_POOLS
            }
        )

    async def add_pools(self, kube: Kube, handler: Handler) -> Informer | None:
        """An InferencePool informer when the API server serves the kind; else ``None``."""
        try:
            await kube.list(INFERENCE_POOLS, label_selector=ROUTER_SELECTOR)
        except ApiError as exc:
            if exc.not_found:
                log.info("InferencePools are not served: their CRD is not installed")
                return None
            if exc.status == 403:
                log.warning("InferencePools are not watched: this controller may not list them")
                return None
            raise
        informer = Informer(
            kube, INFERENCE_POOLS, label_selector=ROUTER_SELECTOR, handlers=[handler]
        )
        self.informers[INFERENCE_POOLS.kind] = informer
        return informer

    def stored_of(self, namespace: str, deployment: str) -> Iterator[dict[str, Any]]:
        """The cached router objects of one deployment (by its instance label)."""
        for informer in self.informers.values():
            for obj in informer.items():
                meta = obj.get("metadata") or {}
                if meta.get("namespace") != namespace:
                    continue
                if (meta.get("labels") or {}).get(labels.INSTANCE) == deployment:
                    yield obj


class RouterSyncer:
    """Applies, prunes and observes the router objects of one deployment per call."""

    def __init__(self, kube: Kube, caches: RouterCaches | None) -> None:
        self.kube = kube
        self.caches = caches or RouterCaches()

    async def _stored(self, resource: Resource, name: str, namespace: str) -> Any:
        informer = self.caches.informers.get(resource.kind)
        if informer is not None:
            cached = informer.get(f"{namespace}/{name}")
            if cached is not None:
                return cached
        return await self.kube.get(resource, name, namespace)

    async def sync(
        self, md: ModelDeployment, rendering: Rendering
    ) -> tuple[RouterObservation | None, BaseException | None]:
        """Bring the router objects in line with ``rendering``; returns the router
        Deployment's observation (``None`` without a router) and the pass's first failure."""
        namespace, name, uid = md.metadata.namespace, md.metadata.name, md.metadata.uid
        router = rendering.router
        if router is not None and router.failure is not None:
            # The router cannot be rendered (RouterReady says why): what runs is left running,
            # neither updated nor pruned, until the spec or the Settings let it render again.
            return RouterObservation(False), None
        wanted = rendering.router_objects()
        others = list(self.caches.stored_of(namespace, name))
        if not wanted and not others:
            return (None if rendering.router is None else RouterObservation(False)), None
        stored: dict[ObjectKey, dict[str, Any] | None] = {}
        for obj in wanted:
            kind, obj_name = str(obj["kind"]), str(obj["metadata"]["name"])
            stored[(kind, obj_name)] = await self._stored(
                ROUTER_RESOURCES[kind], obj_name, namespace
            )
        plan = sync_router(
            wanted,
            stored=stored,
            others=others,
            namespace=namespace,
            owner=name,
            owner_uid=uid,
            manager=FIELD_MANAGER,
        )
        failure: BaseException | None = None
        applied: dict[ObjectKey, dict[str, Any]] = {}
        for obj in plan.apply:
            kind = str(obj["kind"])
            try:
                applied[(kind, str(obj["metadata"]["name"]))] = await self.kube.apply(
                    ROUTER_RESOURCES[kind], obj, field_manager=FIELD_MANAGER, namespace=namespace
                )
            except ApiError as exc:
                failure = failure or exc
        for kind, obj_name, obj_uid in plan.prune:
            try:
                await self.kube.delete(
                    ROUTER_RESOURCES[kind], obj_name, namespace, uid=obj_uid or None
                )
            except ApiError as exc:
                failure = failure or exc
        if plan.conflicts:
            failure = failure or plan.conflicts[0]
        if rendering.router is None:
            return None, failure
        key = (DEPLOYMENTS.kind, rendering.router.object_name)
        deployment = applied.get(key) or stored.get(key)
        return observe_router(deployment, owner_uid=uid), failure
