"""How a pass reads its ModelDeployment: the watch cache, or the answer to the controller's own
last write of it when that is newer, and live only when neither can be trusted.

Every deployment pass and every joint-check verdict starts by reading the deployment. Read live,
that is a GET per pass: at 256 deployments converging, a fifth of the controller's requests
(docs/design/0006-control-plane-at-scale.md). The deployment informer keeps the status too, so
the cache can answer, under the one rule of :mod:`gpustack_kube.cachedread` (synced, following
its stream, the object not being deleted; a miss is read live). One more rule makes that safe
right after the controller wrote the deployment: the cache may still hold the copy from before
the write, so the API server's answer to each status apply and finalizer update is kept, and a
read takes whichever of the two is newer by resource version
(:func:`gpustack_render.reconcile.freshness.newer`); versions that cannot be ordered are read
live. The answer is dropped once the cache has caught up with it, or the deployment is deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_controller import metrics
from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube
from gpustack_kube.cachedread import from_cache
from gpustack_kube.informer import Informer, object_key
from gpustack_render.reconcile.freshness import newer


class DeploymentReads:
    """A deployment by ``namespace/name``: cached, own write, or live."""

    def __init__(self, kube: Kube, informer: Informer | None) -> None:
        self.kube = kube
        self.informer = informer
        #: The API server's answers to our writes, as the cache keeps them, until it catches up.
        self._written: dict[str, dict[str, Any]] = {}

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The deployment, or ``None`` when it does not exist."""
        key = f"{namespace}/{name}"
        cached = from_cache(self.informer, key)
        if isinstance(cached, dict):
            chosen = newer(cached, self._written.get(key))
            if chosen is cached:
                self._written.pop(key, None)
                metrics.DEPLOYMENT_READS.labels("cache").inc()
                return cached
            if chosen is not None:
                metrics.DEPLOYMENT_READS.labels("own-write").inc()
                return dict(chosen)
        metrics.DEPLOYMENT_READS.labels("live").inc()
        return await self.kube.get(MODEL_DEPLOYMENTS, name, namespace)

    def wrote(self, answered: Mapping[str, Any]) -> None:
        """Keep the API server's answer to a write of a deployment (kept as the cache keeps
        it: the informer's own projection)."""
        obj = dict(answered)
        if self.informer is not None:
            obj = self.informer.transform(obj)
        self._written[object_key(obj)] = obj

    def forget(self, key: str) -> None:
        """The deployment is gone: its last answer with it."""
        self._written.pop(key, None)

    def __len__(self) -> int:
        return len(self._written)
