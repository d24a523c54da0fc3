"""Taking a deleted (or unreadable and deleted) ModelDeployment down (docs/contract/controller.md
§12): the library plans it (:mod:`gpustack_render.reconcile.teardown`); this module carries the
plan out: drain the Pods and their Workloads, then release the Binding's claim and the finalizer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

from gpustack_controller import metrics
from gpustack_controller.kube import BINDINGS, MODEL_DEPLOYMENTS, PODS, WORKLOADS, ApiError, Kube
from gpustack_controller.observe import Observer
from gpustack_controller.owned import bounded, failures
from gpustack_controller.recorder import EventRecorder
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.reconcile import claims, events
from gpustack_render.reconcile.teardown import (
    Draining,
    Releasing,
    plan_teardown,
    plan_unreadable_teardown,
)

log = logging.getLogger(__name__)

#: Requeue while anything is held or in flight (docs/contract/controller.md §4 step 11).
HOLD_SECONDS = 2.0
#: An unreadable deployment is looked at again this often (a status-only fix moves no
#: generation, so no watch event would bring it back).
UNREADABLE_RECHECK_SECONDS = 60.0

StatusWriter = Callable[[str, str, ModelDeploymentStatus], Awaitable[None]]


async def write_used_by(kube: Kube, raw_binding: dict[str, Any], used_by: list[Any]) -> None:
    """The Binding's ``status.usedBy``, guarded by the resourceVersion just read."""
    meta = raw_binding["metadata"]
    await kube.merge_patch(
        BINDINGS,
        str(meta["name"]),
        {
            "metadata": {"resourceVersion": meta.get("resourceVersion")},
            "status": {"usedBy": used_by},
        },
        str(meta["namespace"]),
        subresource="status",
    )


def raise_first(results: Iterable[object]) -> None:
    for failure in failures(list(results)):
        raise failure


class Teardown:
    """Carries out the teardown plans of one controller."""

    def __init__(
        self,
        kube: Kube,
        observer: Observer,
        recorder: EventRecorder,
        *,
        write_status: StatusWriter,
        gauges: metrics.StatusGauges,
        now: Callable[[], str],
    ) -> None:
        self.kube = kube
        self.observer = observer
        self.recorder = recorder
        self.write_status = write_status
        self.gauges = gauges
        self.now = now

    async def deleted(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        step = plan_teardown(md, index=await self.observer.index(md), now=self.now())
        return await self._run(md.metadata.namespace, md.metadata.name, raw, step)

    async def unreadable(
        self, key: str, raw: dict[str, Any], errs: Iterable[object]
    ) -> float | None:
        """A stored deployment that does not decode: an Event naming why; a deleted one is
        still torn down from its metadata (its Pods, Workloads, claim and finalizer), so it
        cannot hold them for ever."""
        problems = [str(e) for e in errs]
        log.error("cannot read ModelDeployment %s: %s", key, "; ".join(problems))
        meta = raw.get("metadata") or {}
        deleting = meta.get("deletionTimestamp") is not None
        await self.recorder.record(raw, events.deployment_unreadable(problems, deleting=deleting))
        if not deleting:
            return UNREADABLE_RECHECK_SECONDS
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        index = await self.observer.index_named(namespace, name, str(meta.get("uid") or ""))
        return await self._run(namespace, name, raw, plan_unreadable_teardown(raw, index=index))

    async def _run(
        self, namespace: str, name: str, raw: dict[str, Any], step: Draining | Releasing | None
    ) -> float | None:
        if step is None:
            return None
        if isinstance(step, Draining):
            if step.status is not None:
                await self.write_status(namespace, name, step.status)
                self.gauges.observe(namespace, name, step.status)
            raise_first(
                await bounded(
                    partial(self.kube.delete, PODS, p.name, namespace, uid=p.uid)
                    for p in step.delete_pods
                )
            )
            raise_first(
                await bounded(
                    partial(self.kube.delete, WORKLOADS, w, namespace)
                    for w in step.delete_workloads
                )
            )
            return HOLD_SECONDS
        if step.binding is not None:
            raw_binding = await self.kube.get(BINDINGS, step.binding, namespace)
            if raw_binding is not None:
                remaining = claims.release_from(raw_binding, name)
                if remaining is not None:
                    await write_used_by(self.kube, raw_binding, remaining)
        if step.finalizers is not None:
            try:
                await self.kube.replace(
                    MODEL_DEPLOYMENTS,
                    claims.with_finalizers(raw, step.finalizers),
                    namespace,
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
        self.recorder.forget(namespace, name)
        self.gauges.forget(namespace, name)
        return None
