"""The controller's informers: the shared :class:`gpustack_kube.informer.Informer` with the
controller's watch metrics and its default transform.

What the cache keeps of an object, unless an informer names a projection of its own
(:mod:`gpustack_render.reconcile.projection`), is the object without the ``managedFields``
entries of every other manager than the controller's own (:func:`strip_foreign_managed_fields`):
on every kind, so a kind watched later inherits it. Handlers map events to work-queue keys
(``docs/contract/controller.md`` §2).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_controller import metrics
from gpustack_controller.kube import Kube, Resource
from gpustack_kube import informer as shared
from gpustack_kube.informer import Handler, IndexFunc, Transform, object_key
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.projection import strip_managed_fields

__all__ = [
    "Handler",
    "IndexFunc",
    "Informer",
    "Transform",
    "object_key",
    "strip_foreign_managed_fields",
]


def strip_foreign_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """The default transform: ``obj`` without the ``managedFields`` entries of other managers
    than the controller's own (:data:`~gpustack_render.reconcile.keys.FIELD_MANAGER`)."""
    return strip_managed_fields(obj, (FIELD_MANAGER,))


def _relisted(resource: str) -> None:
    metrics.WATCH_RELISTS.labels(resource).inc()


def _failed(resource: str) -> None:
    metrics.WATCH_ERRORS.labels(resource).inc()


class Informer(shared.Informer):
    """A list+watch cache of one resource, counted in the controller's metrics."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        handlers: list[Handler] | None = None,
        watch_timeout: int = 300,
        inactivity: float = 70.0,
        transform: Transform | None = None,
        indexers: Mapping[str, IndexFunc] | None = None,
    ) -> None:
        super().__init__(
            kube,
            resource,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            handlers=handlers,
            watch_timeout=watch_timeout,
            inactivity=inactivity,
            transform=transform or strip_foreign_managed_fields,
            indexers=indexers,
            on_relist=_relisted,
            on_error=_failed,
        )
