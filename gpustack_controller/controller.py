"""The controller process: informers, event mapping, work queues, workers, leader election.

Watches (docs/contract/controller.md §2) and what each event enqueues:

| Source | Enqueues |
|---|---|
| ModelDeployment | itself, on a generation change, a ``min-render-version`` change, deletion or a
  finalizer change; status-only updates are ignored |
| owned Pods, Services | the controlling deployment |
| Workload | the deployment controlling its owner Pods; the Workload itself into the joint-check
  queue, and — when it carries the check — every other Workload of that deployment |
| KVCachePoolBinding | deployments in its namespace whose ``poolRef`` names it |
| InstanceType | every deployment with a role on it |
| KVCachePool, KVCacheBackend | through the Bindings (and pools) that name them |
| the ``gpustack-settings`` ConfigMap | every deployment (Settings changed) |

:class:`Controller` runs it all in the current event loop; ``__main__`` adds signals and the
health server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpustack_controller.admissioncheck import (
    AdmissionCheckReconciler,
    ensure_admission_check,
    keep_admission_check,
)
from gpustack_controller.kube import (
    BACKENDS,
    BINDINGS,
    CONFIGMAPS,
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    POOLS,
    SERVICES,
    WORKLOADS,
    Kube,
)
from gpustack_controller.leader import LeaderElector
from gpustack_controller.reconciler import Caches, DeploymentReconciler
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.watches import Informer, object_key
from gpustack_controller.workqueue import WorkQueue
from gpustack_render.api.modeldeployment import KIND as MD_KIND
from gpustack_render.core import labels
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings, settings_of_config_map
from gpustack_render.reconcile.jointcheck import CHECK_NAME

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """How the process runs."""

    system_namespace: str = "gpustack-system"
    workers: int = 8
    check_workers: int = 4
    leader_election: bool = True
    lease_name: str = "gpustack-controller"
    identity: str = "gpustack-controller"
    #: Ensure the joint AdmissionCheck object and run its verdicts.
    admission_check: bool = True


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


def _controller_ref(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for ref in _meta(obj).get("ownerReferences") or ():
        if ref.get("controller") is True and ref.get("kind") == kind:
            return dict(ref)
    return None


class Controller:
    """Everything one controller process runs."""

    def __init__(self, kube: Kube, options: Options | None = None) -> None:
        self.kube = kube
        self.options = options or Options()
        self.settings = Settings(system_namespace=self.options.system_namespace)
        self.queue = WorkQueue("modeldeployment")
        self.check_queue = WorkQueue("jointcheck")
        selector = f"{labels.NAME}={labels.NAME_VALUE}"
        self.informers = {
            "deployments": Informer(kube, MODEL_DEPLOYMENTS, handlers=[self._on_deployment]),
            "pods": Informer(kube, PODS, label_selector=selector, handlers=[self._on_owned]),
            "services": Informer(
                kube, SERVICES, label_selector=selector, handlers=[self._on_owned]
            ),
            "workloads": Informer(kube, WORKLOADS, handlers=[self._on_workload]),
            "bindings": Informer(kube, BINDINGS, handlers=[self._on_binding]),
            "pools": Informer(kube, POOLS, handlers=[self._on_pool]),
            "backends": Informer(kube, BACKENDS, handlers=[self._on_backend]),
            "instance_types": Informer(kube, INSTANCE_TYPES, handlers=[self._on_instance_type]),
            "settings": Informer(
                kube,
                CONFIGMAPS,
                namespace=self.options.system_namespace,
                # One ConfigMap by name: RBAC can then grant list/watch on that name only.
                field_selector=f"metadata.name={CONFIGMAP_NAME}",
                handlers=[self._on_settings],
            ),
        }
        i = self.informers
        self.caches = Caches(
            deployments=i["deployments"],
            pods=i["pods"],
            services=i["services"],
            workloads=i["workloads"],
            bindings=i["bindings"],
            pools=i["pools"],
            backends=i["backends"],
            instance_types=i["instance_types"],
        )
        self.recorder = EventRecorder(kube)
        self.reconciler = DeploymentReconciler(
            kube, self.caches, self.recorder, settings=lambda: self.settings
        )
        self.checker = AdmissionCheckReconciler(kube, i["pods"], settings=lambda: self.settings)
        self.elector = LeaderElector(
            kube,
            namespace=self.options.system_namespace,
            name=self.options.lease_name,
            identity=self.options.identity,
        )
        self._tasks: list[asyncio.Task[Any]] = []
        self._pod_owner: dict[str, tuple[str, str]] = {}  # pod uid → (namespace, md name)
        self._started = False

    # ---- lifecycle --------------------------------------------------------------------------

    async def start(self, *, sync_timeout: float = 60.0) -> None:
        """Take the lease (when electing), start the informers, wait for their first lists, and
        start the workers."""
        if self.options.leader_election:
            await self.elector.acquire()
        for informer in self.informers.values():
            self._tasks.append(informer.start())
        await asyncio.wait_for(
            asyncio.gather(*(i.synced.wait() for i in self.informers.values())), sync_timeout
        )
        if self.options.admission_check:
            await ensure_admission_check(self.kube)
        self._tasks.append(
            asyncio.create_task(
                self.queue.run_workers(self.reconciler, workers=self.options.workers),
                name="workers",
            )
        )
        if self.options.admission_check:
            self._tasks.append(
                asyncio.create_task(
                    self.check_queue.run_workers(self.checker, workers=self.options.check_workers),
                    name="check-workers",
                )
            )
            self._tasks.append(
                asyncio.create_task(keep_admission_check(self.kube), name="admission-check")
            )
        if self.options.leader_election:
            self._tasks.append(asyncio.create_task(self.elector.keep(), name="lease"))
        self._started = True

    async def wait(self) -> None:
        """Until a task ends (a lost lease ends the lease keeper; nothing else ends)."""
        done, _ = await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            if task.exception() is not None:
                raise task.exception()  # type: ignore[misc]

    async def stop(self) -> None:
        """Cancel every task; release the lease."""
        self.queue.close()
        self.check_queue.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()
        if self.options.leader_election:
            await self.elector.release()
        self._started = False

    def healthy(self) -> tuple[bool, str]:
        if not self._started:
            # A standby replica waiting for the lease is alive: it must not be restarted.
            return True, "standby"
        dead = [t.get_name() for t in self._tasks if t.done()]
        if dead:
            return False, "stopped: " + ", ".join(dead)
        return True, "ok"

    # ---- event mapping ------------------------------------------------------------------------

    def enqueue_all(self) -> None:
        for obj in self.caches.deployments.items():
            self.queue.add(object_key(obj))

    def _deployments(self) -> Iterable[dict[str, Any]]:
        return self.caches.deployments.items()

    def _on_deployment(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if kind == "DELETED":
            # Gone (with or without a teardown pass): its status series go with it.
            meta = _meta(new)
            self.reconciler.gauges.forget(str(meta.get("namespace") or ""), str(meta.get("name")))
            return
        if kind == "MODIFIED" and old is not None:
            a, b = _meta(old), _meta(new)
            floor = labels.MIN_RENDER_VERSION
            changed = (
                a.get("generation") != b.get("generation")
                or (a.get("annotations") or {}).get(floor)
                != (b.get("annotations") or {}).get(floor)
                or a.get("deletionTimestamp") != b.get("deletionTimestamp")
                or a.get("finalizers") != b.get("finalizers")
            )
            if not changed:
                return  # a status-only update (our own writes included)
        self.queue.add(object_key(new))

    def _on_owned(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        ref = _controller_ref(new, MD_KIND)
        if ref is None:
            return
        namespace = str(_meta(new).get("namespace") or "")
        uid = str(_meta(new).get("uid") or "")
        if new.get("kind") == "Pod" and uid:
            if kind == "DELETED":
                self._pod_owner.pop(uid, None)
            else:
                self._pod_owner[uid] = (namespace, str(ref.get("name")))
        self.queue.add(f"{namespace}/{ref.get('name')}")

    def _on_workload(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = _meta(new)
        namespace = str(meta.get("namespace") or "")
        owners = {
            self._pod_owner[str(ref.get("uid"))]
            for ref in meta.get("ownerReferences") or ()
            if ref.get("kind") == "Pod" and str(ref.get("uid")) in self._pod_owner
        }
        for ns, name in owners:
            self.queue.add(f"{ns}/{name}")
        if kind == "DELETED" or not self.options.admission_check:
            return
        self.check_queue.add(object_key(new))
        checks = (new.get("status") or {}).get("admissionChecks") or ()
        if any(c.get("name") == CHECK_NAME for c in checks) and owners:
            # One replica's reservation can complete the set: look at its siblings again.
            uids = {uid for uid, owner in self._pod_owner.items() if owner in owners}
            for other in self.caches.workloads.items():
                if other is new:
                    continue
                refs = _meta(other).get("ownerReferences") or ()
                if _meta(other).get("namespace") == namespace and any(
                    str(r.get("uid")) in uids for r in refs
                ):
                    self.check_queue.add(object_key(other))

    def _deployments_on_binding(self, namespace: str, name: str) -> None:
        for md in self._deployments():
            spec = md.get("spec") or {}
            ref = ((spec.get("kvCache") or {}).get("poolRef") or {}).get("name")
            if _meta(md).get("namespace") == namespace and ref == name:
                self.queue.add(object_key(md))

    def _on_binding(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        self._deployments_on_binding(str(_meta(new).get("namespace")), str(_meta(new).get("name")))

    def _on_pool(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        pool = _meta(new).get("name")
        for binding in self.caches.bindings.items():
            if ((binding.get("spec") or {}).get("poolRef") or {}).get("name") == pool:
                self._on_binding(kind, binding, None)

    def _on_backend(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        backend = _meta(new).get("name")
        for pool in self.caches.pools.items():
            if backend in ((pool.get("spec") or {}).get("backends") or ()):
                self._on_pool(kind, pool, None)

    def _on_instance_type(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        name = _meta(new).get("name")
        for md in self._deployments():
            roles = (md.get("spec") or {}).get("roles") or ()
            if any(r.get("instanceType") == name for r in roles):
                self.queue.add(object_key(md))

    def _on_settings(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        if _meta(new).get("name") != CONFIGMAP_NAME:
            return
        settings, errs = settings_of_config_map(
            None if kind == "DELETED" else new, system_namespace=self.options.system_namespace
        )
        for err in errs:
            log.warning("ConfigMap %s: %s (the default is kept)", CONFIGMAP_NAME, err.message())
        if settings != self.settings:
            self.settings = settings
            self.enqueue_all()
