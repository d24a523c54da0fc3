"""The controller process: informers, event mapping, work queues, workers, leader election.

Watches (docs/contract/controller.md §2) and what each event enqueues:

| Source | Enqueues |
|---|---|
| ModelDeployment | itself, on a generation change, a ``min-render-version`` change, deletion or a
  finalizer change; status-only updates are ignored |
| owned Pods, Services | the controlling deployment |
| the router's objects (D26; ``owned.py``) | the controlling deployment |
| Workload | the deployment controlling its owner Pods; the Workload itself into the joint-check
  queue, and — when it carries the check — every other Workload of that deployment |
| KVCachePoolBinding | deployments in its namespace whose ``poolRef`` names it |
| InstanceType | every deployment with a role on it |
| KVCachePool, KVCacheBackend | through the Bindings (and pools) that name them |
| the ``gpustack-settings`` ConfigMap | every deployment and every artifact (Settings changed) |
| ModelArtifact | itself (artifact queue), on creation, a generation, deletion or finalizer
  change; status-only updates are ignored |
| ModelDeployment deleted, or its ``artifactRef`` changed | the artifact it named (artifact queue:
  its finalizer may go) |

Which deployments an input event concerns is the library's
:class:`~gpustack_render.reconcile.inputindex.InputIndex`; whose a Pod or a Workload is, its
:class:`~gpustack_render.reconcile.ownerindex.OwnerIndex`; which Workloads go back to the joint
check, :func:`~gpustack_render.reconcile.jointcheck.siblings_to_recheck`. Each is updated by the
event's own object, so handling an event costs what it concerns, not the number of deployments.

Keys are queued by priority (:class:`~gpustack_controller.workqueue.Priority`): a user's edit of
a deployment (a new generation, the render-version floor, a deletion) is ``HIGH``; events of its
own Pods, Services and Workloads ``NORMAL``; the fan-outs of an input or a Settings change,
which queue every reader at once, ``LOW``. So an edit is never queued behind a thousand passes
that an InstanceType's change asked for (docs/design/0006-control-plane-at-scale.md).

The caches keep only what reconciling reads (:mod:`gpustack_render.reconcile.projection`): no
``managedFields`` but the controller's own apply entries, on every kind; Pods and Workloads
projected to the fields their observers read; ModelDeployments whole, status included: a pass
reads its deployment from the cache, or from the answer to the controller's own last write of it
when that is newer (``deployments.py``). Services are indexed by their controlling deployment's
uid and Workloads by their owner Pods' uids, so a pass reads its own from the caches without a
walk.

:class:`Controller` runs it all in the current event loop; ``__main__`` adds signals and the
health server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from gpustack_controller.admissioncheck import (
    AdmissionCheckReconciler,
    ensure_admission_check,
    keep_admission_check,
)
from gpustack_controller.artifacts import ArtifactReconciler
from gpustack_controller.caches import ARTIFACTS_BY_DIGEST, NODE_STORES_BY_DIGEST, Caches
from gpustack_controller.kube import (
    BACKENDS,
    BINDINGS,
    CONFIGMAPS,
    CSI_DRIVERS,
    INSTANCE_TYPES,
    LOCAL_QUEUES,
    MODEL_ARTIFACTS,
    MODEL_DEPLOYMENTS,
    NODE_MODEL_STORES,
    PERSISTENT_VOLUME_CLAIMS,
    PERSISTENT_VOLUMES,
    PODS,
    POOLS,
    SCALERS,
    SERVICES,
    STORAGE_CLASSES,
    WORKLOADS,
    Kube,
)
from gpustack_controller.leader import LeaderElector
from gpustack_controller.owned import pool_informer, router_informers
from gpustack_controller.reconciler import DeploymentReconciler
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.watches import Handler, Informer, object_key
from gpustack_controller.workqueue import Priority, WorkQueue
from gpustack_render.api.artifact import ModelArtifact
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.storage import (
    CSIDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from gpustack_render.core import labels
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings, settings_of_config_map
from gpustack_render.reconcile import claims
from gpustack_render.reconcile.artifacts import artifacts_to_recheck, claiming
from gpustack_render.reconcile.inputindex import InputIndex
from gpustack_render.reconcile.inputs import Read
from gpustack_render.reconcile.jointcheck import reads_members, siblings_to_recheck
from gpustack_render.reconcile.keys import FIELD_MANAGER
from gpustack_render.reconcile.observed import observe_workload
from gpustack_render.reconcile.ownerindex import OwnerIndex, controlling_deployment_key
from gpustack_render.reconcile.projection import (
    project_pod,
    project_workload,
    strip_managed_fields,
)
from gpustack_render.weights import nodes as node_stores

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
    #: Workers of the ModelArtifact queue (each resolution runs its hub calls in a thread).
    artifact_workers: int = 4


def _meta(obj: dict[str, Any] | None) -> dict[str, Any]:
    return (obj or {}).get("metadata") or {}


#: The managers whose ``managedFields`` entries the caches keep (the controller's own).
OWN_MANAGERS: Final = (FIELD_MANAGER,)


class Controller:
    """Everything one controller process runs."""

    def __init__(self, kube: Kube, options: Options | None = None) -> None:
        self.kube = kube
        self.options = options or Options()
        self.settings = Settings(system_namespace=self.options.system_namespace)
        # A quarter of the workers at most on fan-out passes: the rest stay free for edits.
        self.queue = WorkQueue("modeldeployment", max_low=max(1, self.options.workers // 4))
        self.check_queue = WorkQueue("jointcheck")
        self.artifact_queue = WorkQueue("modelartifact")
        #: Artifacts whose status.nodes may have to change (NodeModelStore records moved).
        self.nodes_queue = WorkQueue("artifactnodes")
        selector = f"{labels.NAME}={labels.NAME_VALUE}"
        self.informers = {
            "deployments": Informer(
                kube,
                MODEL_DEPLOYMENTS,
                handlers=[self._on_deployment],
                transform=partial(strip_managed_fields, keep=OWN_MANAGERS),
            ),
            "pods": Informer(
                kube,
                PODS,
                label_selector=selector,
                handlers=[self._on_owned],
                transform=partial(project_pod, keep_managers=OWN_MANAGERS),
            ),
            "services": Informer(
                kube,
                SERVICES,
                label_selector=selector,
                handlers=[self._on_owned],
            ),
            "workloads": Informer(
                kube,
                WORKLOADS,
                handlers=[self._on_workload],
                transform=partial(project_workload, keep_managers=OWN_MANAGERS),
            ),
            "scalers": Informer(kube, SCALERS, label_selector=selector, handlers=[self._on_scaler]),
            "bindings": Informer(kube, BINDINGS, handlers=[self._on_input(KVCachePoolBinding)]),
            "pools": Informer(kube, POOLS, handlers=[self._on_input(KVCachePool)]),
            "backends": Informer(kube, BACKENDS, handlers=[self._on_input(KVCacheBackend)]),
            "instance_types": Informer(
                kube, INSTANCE_TYPES, handlers=[self._on_input(InstanceType)]
            ),
            # The weight inputs (D28): the artifacts deployments name and what their delivery
            # reads (a claim, its volume and class; the node plugin's driver).
            # An artifact's own queue takes its spec and deletion; every change (its status
            # too) reaches the deployments that name it.
            "artifacts": Informer(
                kube,
                MODEL_ARTIFACTS,
                handlers=[self._on_input(ModelArtifact), self._on_artifact],
            ),
            "claims": Informer(
                kube,
                PERSISTENT_VOLUME_CLAIMS,
                handlers=[self._on_input(PersistentVolumeClaim), self._on_claim],
            ),
            "volumes": Informer(
                kube, PERSISTENT_VOLUMES, handlers=[self._on_input(PersistentVolume)]
            ),
            "storage_classes": Informer(
                kube, STORAGE_CLASSES, handlers=[self._on_input(StorageClass)]
            ),
            "csi_drivers": Informer(kube, CSI_DRIVERS, handlers=[self._on_input(CSIDriver)]),
            # The node plugin's records (issue 34): which nodes hold, fetch or failed each
            # digest; indexed by digest, they reach the artifacts and deployments of a digest.
            "node_stores": Informer(
                kube,
                NODE_MODEL_STORES,
                handlers=[self._on_node_store],
                indexers={NODE_STORES_BY_DIGEST: node_stores.listed_digests},
            ),
            # Read by every pass (is the deployment's LocalQueue there, and whose is it).
            "local_queues": Informer(kube, LOCAL_QUEUES),
            "settings": Informer(
                kube,
                CONFIGMAPS,
                namespace=self.options.system_namespace,
                # One ConfigMap by name: RBAC can then grant list/watch on that name only.
                field_selector=f"metadata.name={CONFIGMAP_NAME}",
                handlers=[self._on_settings],
            ),
        }
        self.routers = router_informers(kube, self._on_owned)
        for kind, informer in self.routers.items():
            self.informers[f"router-{kind}"] = informer
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
            routers=self.routers,
            scalers=i["scalers"],
            local_queues=i["local_queues"],
            artifacts=i["artifacts"],
            claims=i["claims"],
            volumes=i["volumes"],
            storage_classes=i["storage_classes"],
            csi_drivers=i["csi_drivers"],
            node_stores=i["node_stores"],
        )
        i["artifacts"].add_indexer(ARTIFACTS_BY_DIGEST, node_stores.artifact_digest)
        self.recorder = EventRecorder(kube)
        self.reconciler = DeploymentReconciler(
            kube, self.caches, self.recorder, settings=lambda: self.settings
        )
        self.artifacts = ArtifactReconciler(
            kube,
            artifacts=i["artifacts"],
            deployments=i["deployments"],
            recorder=self.recorder,
            settings=lambda: self.settings,
            node_stores=i["node_stores"],
        )
        self.checker = AdmissionCheckReconciler(
            kube,
            i["pods"],
            settings=lambda: self.settings,
            workloads=i["workloads"],
            deployments=i["deployments"],
        )
        self.elector = LeaderElector(
            kube,
            namespace=self.options.system_namespace,
            name=self.options.lease_name,
            identity=self.options.identity,
        )
        self._tasks: list[asyncio.Task[Any]] = []
        #: Which deployments read each input object; whose each Pod and Workload is.
        self.inputs = InputIndex()
        self.owners = OwnerIndex()
        self._started = False

    # ---- lifecycle --------------------------------------------------------------------------

    async def start(self, *, sync_timeout: float = 60.0) -> None:
        """Take the lease (when electing), start the informers, wait for their first lists, and
        start the workers."""
        if self.options.leader_election:
            await self.elector.acquire()
        pools = await pool_informer(self.kube, self._on_owned)
        if pools is not None:
            self.informers["router-InferencePool"] = pools
            self.routers["InferencePool"] = pools
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
        self._tasks.append(
            asyncio.create_task(
                self.artifact_queue.run_workers(
                    self.artifacts, workers=self.options.artifact_workers
                ),
                name="artifact-workers",
            )
        )
        self._tasks.append(
            asyncio.create_task(
                self.nodes_queue.run_workers(self.artifacts.count_nodes, workers=1),
                name="artifact-nodes-workers",
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
        self.artifact_queue.close()
        self.nodes_queue.close()
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
        """Every deployment, in the low lane (a Settings change concerns them all)."""
        for obj in self.caches.deployments.items():
            self.queue.add(object_key(obj), priority=Priority.LOW)

    def _on_deployment(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        for artifact in artifacts_to_recheck(kind, new, old):
            self.artifact_queue.add(artifact)
        if kind == "DELETED":
            # Gone (with or without a teardown pass): its status series go with it.
            meta = _meta(new)
            self.inputs.deployment_deleted(object_key(new))
            self.reconciler.deployments.forget(object_key(new))
            self.reconciler.gauges.forget(str(meta.get("namespace") or ""), str(meta.get("name")))
            return
        self.inputs.deployment_changed(object_key(new), new)
        if kind == "MODIFIED" and old is not None:
            a, b = _meta(old), _meta(new)
            floor = labels.MIN_RENDER_VERSION
            edited = (
                a.get("generation") != b.get("generation")
                or (a.get("annotations") or {}).get(floor)
                != (b.get("annotations") or {}).get(floor)
                or a.get("deletionTimestamp") != b.get("deletionTimestamp")
            )
            if edited:
                # A user's edit: ahead of every fan-out and event waiting.
                self.queue.add(object_key(new), priority=Priority.HIGH)
            elif claims.finalizer_removed(a.get("finalizers"), b.get("finalizers")):
                self.queue.add(object_key(new))
            return  # otherwise a status-only update (our own writes included)
        # A deployment created while the controller runs is a user's edit too; the initial
        # list's are a resync of what may well be converged already.
        synced = self.informers["deployments"].synced.is_set()
        self.queue.add(object_key(new), priority=Priority.HIGH if synced else Priority.LOW)

    def _on_owned(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = controlling_deployment_key(new)
        if new.get("kind") == "Pod":
            uid = str(_meta(new).get("uid") or "")
            if kind == "DELETED":
                self.owners.pod_deleted(uid)
            else:
                self.owners.pod_changed(uid, key)
        if key is not None:
            self.queue.add(key)

    def _on_scaler(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A ModelDeploymentScaler: its deployment, when the count (the generation), its owner
        or its existence changed; the controller's own status writes are ignored."""
        if kind == "MODIFIED" and old is not None:
            a, b = _meta(old), _meta(new)
            if a.get("generation") == b.get("generation") and a.get("ownerReferences") == b.get(
                "ownerReferences"
            ):
                return
        key = controlling_deployment_key(new)
        if key is not None:
            self.queue.add(key)

    def _on_workload(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        key = object_key(new)
        workload = observe_workload(new)
        # A group's Workload may outlive its Pods: its last events still reach the deployment.
        for owner in sorted(self.owners.deployments_owning(workload.owner_pods, deleted_too=True)):
            self.queue.add(owner)
        if kind == "DELETED":
            self.owners.workload_deleted(key)
            return
        self.owners.workload_changed(key, workload.owner_pods)
        if not self.options.admission_check:
            return
        self.check_queue.add(key)
        if not self._joint(self.owners.deployments_owning(workload.owner_pods)):
            return  # single-role deployments: no sibling's verdict reads this Workload
        for sibling in siblings_to_recheck(key, workload, self.owners):
            self.check_queue.add(sibling)

    def _joint(self, deployments: set[str]) -> bool:
        """Whether any of ``deployments`` has replicas the joint check judges together (two
        roles or more; one not in the cache counts, to be safe)."""
        for key in deployments:
            spec = (self.caches.deployments.get(key) or {}).get("spec")
            roles = spec.get("roles") if isinstance(spec, dict) else None
            if not isinstance(roles, list) or reads_members(len(roles)):
                return True
        return False

    def _on_input(self, input_kind: type[InputObject]) -> Handler:
        """The handler of one input kind: every deployment whose render reads the object."""

        def handle(kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
            if kind == "DELETED":
                keys = self.inputs.input_deleted(input_kind, new)
            else:
                keys = self.inputs.input_changed(input_kind, new)
            for key in keys:
                self.queue.add(key, priority=Priority.LOW)

        return handle

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
            self.artifacts.settings_changed()
            for obj in self.informers["artifacts"].items():
                self.artifact_queue.add(object_key(obj), priority=Priority.LOW)

    def _on_claim(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A claim: the artifacts whose claim source names it (one created after its artifact
        resolves it now, not at the next retry)."""
        for key in claiming(self.informers["artifacts"].items(), new):
            self.artifact_queue.add(key)

    def _on_node_store(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A NodeModelStore: the artifacts of each digest whose entry changed recount
        ``status.nodes``; the deployments naming an artifact of a digest whose state, reason,
        retry time or room changed look again (progress alone moves no deployment)."""
        before = old if kind != "ADDED" else None
        after = None if kind == "DELETED" else new
        viewed, counted = node_stores.changed_digests(before, after)
        artifacts = self.informers["artifacts"]
        for digest in sorted(counted):
            for raw in artifacts.by_index(ARTIFACTS_BY_DIGEST, digest):
                self.nodes_queue.add(object_key(raw))
                if digest in viewed:
                    for key in self.inputs.readers(Read.of(ModelArtifact, raw)):
                        self.queue.add(key, priority=Priority.LOW)

    def _on_artifact(self, kind: str, new: dict[str, Any], old: dict[str, Any] | None) -> None:
        """A ModelArtifact: itself, unless only its status moved (the controller's own
        writes); its nodes' count when its digest appears."""
        key = object_key(new)
        if kind == "DELETED":
            self.artifacts.forget(key)
            return
        digest = node_stores.artifact_digest(new)
        if digest and digest != node_stores.artifact_digest(old or {}):
            self.nodes_queue.add(key)  # its digest appeared: count the nodes holding it
        if kind == "MODIFIED" and old is not None:
            a, b = _meta(old), _meta(new)
            if (
                a.get("generation") == b.get("generation")
                and a.get("deletionTimestamp") == b.get("deletionTimestamp")
                and a.get("finalizers") == b.get("finalizers")
            ):
                return
        self.artifact_queue.add(key)
