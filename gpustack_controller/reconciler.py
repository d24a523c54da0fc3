"""The ModelDeployment reconcile pass: fetch, render, plan, apply
(docs/contract/controller.md §3–§12).

Every decision comes from the library (:mod:`gpustack_render.reconcile`: the input graph, the
rollout plan, Service sync, status, events, claims, the teardown plan; and ``render``); this
module fetches what they ask for, calls them, and writes what they return, in the order the
planner documents. A pass:

1. gets the deployment (gone → done); a ``deletionTimestamp`` → teardown
   (:func:`~gpustack_render.reconcile.teardown.plan_teardown`); no finalizer → add it with an
   update;
2. fetches the objects the input graph asks for (cache first, then a live read; a stored object
   that does not decode is a failed read, as in the webhook), claims the Binding
   (``status.usedBy``), renders (a render error → a ``RenderFailed`` event, the status of the
   generation that failed written when it changed, and a retry; nothing else is touched);
3. lists the deployment's Pods from the API server (uncached: the create gate must see every
   Pod that still holds a group name) and reads the Workloads owning them or named after its
   groups from the Workload cache (indexed by owner Pod: a cache only ever lags behind, so a
   Workload it shows is still held, never freed early), creates the missing LocalQueues (the
   ones found feeding another ClusterQueue are a planner input: their roles get no Pod),
   plans, persists a newly chosen replacement, deletes Pods then Workloads, creates whole
   seats, applies the Services that are not aligned (a Service held by another owner is the
   pass's failure: :class:`~gpustack_render.reconcile.servicesync.ServiceConflict`), then the
   router's objects (``routers.py``; the same rules,
   :class:`~gpustack_render.reconcile.routersync.RouterConflict`);
4. observes again when it deleted Pods or Workloads (a pass that only created adds the Pods
   as the API server answered them), writes the status through the status subresource when it
   changed, records events;
5. returns the requeue delay (2 s while anything is held or in flight).

A pass that changes nothing writes nothing: a status equal to the stored one, an aligned
Service and an unchanged Binding claim are not sent, so a converged cluster sees reads only.
Nothing in a pass walks every deployment or every object of a kind: its own Pods are listed by
label, its Services and Workloads are read through the caches' indexes.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

from gpustack_controller import metrics
from gpustack_controller.kube import (
    BINDINGS,
    LOCAL_QUEUES,
    MODEL_DEPLOYMENTS,
    PODS,
    SCALERS,
    SERVICES,
    WORKLOADS,
    ApiError,
    Kube,
)
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.routers import RouterCaches, RouterSyncer
from gpustack_controller.watches import Informer, object_key
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import KIND, ModelDeployment, ModelDeploymentStatus
from gpustack_render.cli.gcpause import paused_gc
from gpustack_render.core import ownerrefs
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile import claims, events
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.reconcile.jointcheck import owner_pods
from gpustack_render.reconcile.keys import FIELD_MANAGER, deployment_selector, split_key
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.queues import QueueConflict, queue_conflict
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import RolloutStep, plan, requeue_after
from gpustack_render.reconcile.rolloutinputs import (
    cache_hold,
    desired_from_rendering,
    remembered_replacing,
    with_replacing,
)
from gpustack_render.reconcile.scalerstatus import (
    scaler_status,
    scaler_status_changed,
    scaler_status_json,
    stored_status,
)
from gpustack_render.reconcile.scaling import (
    ScalerSync,
    ScalingState,
    observed_scalers,
    resolve_scaling,
    scaler_candidates,
    sync_scalers,
)
from gpustack_render.reconcile.servicesync import service_aligned, sync_services
from gpustack_render.reconcile.status import (
    deployment_status,
    render_failed_status,
    status_changed,
    status_to_json,
)
from gpustack_render.reconcile.teardown import (
    Draining,
    Releasing,
    plan_teardown,
    plan_unreadable_teardown,
)
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment

__all__ = ["FIELD_MANAGER", "Caches", "DeploymentReconciler", "service_aligned"]

log = logging.getLogger(__name__)

#: Requeue while anything is held or in flight (docs/contract/controller.md §4 step 11).
HOLD_SECONDS: Final = 2.0
#: A LocalQueue found feeding another ClusterQueue is looked at again this often.
QUEUE_RECHECK_SECONDS: Final = 60.0
#: Concurrent writes of one pass.
WRITE_CONCURRENCY: Final = 32

T = TypeVar("T")


def utc_now() -> str:
    """The wall clock as RFC 3339 (seconds, UTC): what conditions carry."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def bounded(
    jobs: Iterable[Callable[[], Awaitable[T]]], *, limit: int = WRITE_CONCURRENCY
) -> list[T | BaseException]:
    """Run ``jobs`` with at most ``limit`` in flight; results or exceptions, in order."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True))


#: The index of the Services' informer by controlling deployment uid, and of the Workloads'
#: informer by owner Pod uid (added by the reconcilers that read them).
SERVICES_BY_OWNER: Final = "controller-uid"
WORKLOADS_BY_POD: Final = "owner-pod"


def controller_uid(obj: Mapping[str, Any]) -> list[str]:
    """The uid of the ModelDeployment controlling ``obj`` (none: not indexed)."""
    ref = ownerrefs.controller_of(obj, kind=KIND)
    return [str(ref["uid"])] if ref is not None and ref.get("uid") else []


def owner_pod_uids(obj: Mapping[str, Any]) -> list[str]:
    """The uids of the Pods owning a Workload."""
    return [str(r["uid"]) for r in owner_pods(obj) if r.get("uid")]


@dataclass
class Caches:
    """The informers a pass reads input objects from (a live read on a cache miss)."""

    deployments: Informer
    pods: Informer
    services: Informer
    workloads: Informer
    bindings: Informer
    pools: Informer
    backends: Informer
    instance_types: Informer
    #: The router's objects (D26); none: every read is live and nothing is pruned.
    routers: RouterCaches | None = None
    #: ModelDeploymentScalers (D27); the count of an autoscaled role is read here.
    scalers: Informer | None = None
    #: LocalQueues (optional: without it each pass GETs the ones it needs).
    local_queues: Informer | None = None

    def of(self, kind: type[InputObject]) -> Informer:
        """The informer of an input kind."""
        by_kind: dict[type[InputObject], Informer] = {
            InstanceType: self.instance_types,
            KVCachePoolBinding: self.bindings,
            KVCachePool: self.pools,
            KVCacheBackend: self.backends,
        }
        return by_kind[kind]


class DeploymentReconciler:
    """Reconciles one ModelDeployment per call (a work-queue key ``<namespace>/<name>``)."""

    def __init__(
        self,
        kube: Kube,
        caches: Caches,
        recorder: EventRecorder,
        *,
        settings: Callable[[], Settings],
        now: Callable[[], str] = utc_now,
        gauges: metrics.StatusGauges = metrics.STATUS,
    ) -> None:
        self.kube = kube
        self.caches = caches
        self.recorder = recorder
        self.settings = settings
        self.now = now
        #: Replicas by state and rollouts in progress, from each status this pass computes.
        self.gauges = gauges
        caches.services.add_indexer(SERVICES_BY_OWNER, controller_uid)
        caches.workloads.add_indexer(WORKLOADS_BY_POD, owner_pod_uids)
        # (kind, key, resourceVersion) of each unreadable input already logged.
        self._unreadable_logged: set[tuple[str, str, str]] = set()
        self.routers = RouterSyncer(kube, caches.routers)

    async def __call__(self, key: str) -> float | None:
        namespace, name = split_key(key)
        raw = await self.kube.get(MODEL_DEPLOYMENTS, name, namespace)
        if raw is None:
            self.recorder.forget(namespace, name)
            self.gauges.forget(namespace, name)
            return None
        md, errs = decode_deployment(raw)
        if md is None:
            return await self._unreadable(key, raw, errs)
        if md.metadata.deletion_timestamp is not None:
            return await self._teardown(md, raw)
        finalizers = claims.with_finalizer(md.metadata.finalizers)
        if finalizers is not None:
            raw = await self.kube.replace(
                MODEL_DEPLOYMENTS,
                {**raw, "metadata": {**raw["metadata"], "finalizers": finalizers}},
                namespace,
            )
            md, _ = decode_deployment(raw)
            assert md is not None
        return await self._converge(md, raw)

    # ---- inputs -----------------------------------------------------------------------------

    async def _read(
        self, informer: Informer, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        key = f"{namespace}/{name}" if namespace else name
        cached = informer.get(key)
        if cached is not None:
            return cached
        return await self.kube.get(informer.resource, name, namespace)

    async def _inputs(self, md: ModelDeployment) -> InputGraph:
        """The objects the render reads, fetched round by round as the library finds them."""
        graph = InputGraph(md)
        while pending := graph.pending():
            for read in pending:
                graph.answer(read, await self._fetch(read))
        return graph

    def _log_unreadable(self, graph: InputGraph) -> None:
        """Log each unreadable input once per stored version (an Event names it on each
        deployment that reads it)."""
        for bad in graph.unreadable:
            read = bad.read
            key = f"{read.namespace}/{read.name}" if read.namespace else read.name
            seen = (read.kind.__name__, key, bad.resource_version)
            if seen not in self._unreadable_logged:
                self._unreadable_logged.add(seen)
                log.error(
                    "%s %s is unreadable: %s", read.kind.__name__, key, bad.failure.reason[:512]
                )

    async def _fetch(self, read: Read) -> dict[str, Any] | None:
        return await self._read(self.caches.of(read.kind), read.name, read.namespace or None)

    async def _observe(
        self, md: ModelDeployment, groups: frozenset[str] = frozenset()
    ) -> ReplicaIndex:
        """Every Pod carrying the deployment's selector and the namespace's Workloads owning
        one of them or named after one of ``groups`` (a group's Workload outlives its Pods), as
        the API server holds them now, indexed once for the pass."""
        meta = md.metadata
        return await self._observe_named(meta.namespace, meta.name, meta.uid, groups)

    async def _observe_named(
        self, namespace: str, name: str, uid: str, groups: frozenset[str] = frozenset()
    ) -> ReplicaIndex:
        return ReplicaIndex.of(*await self._observed(namespace, name, uid, groups))

    async def _observed(
        self, namespace: str, name: str, uid: str, groups: frozenset[str] = frozenset()
    ) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
        """The deployment's Pods (listed live, by label) and the Workloads owning one of them
        or named after one of ``groups`` (from the Workload cache), Workloads in name order as
        a list of the namespace would give them."""
        raw_pods, _ = await self.kube.list(
            PODS, namespace, label_selector=deployment_selector(name)
        )
        pods = [observe_pod(p, owner_uid=uid) for p in raw_pods]
        uids = {p.uid for p in pods}
        return pods, await self._workloads_of(namespace, uids, groups)

    async def _workloads_of(
        self, namespace: str, pod_uids: Set[str], groups: Set[str]
    ) -> list[ObservedWorkload]:
        cache = self.caches.workloads
        if not cache.synced.is_set():  # no cache to read yet: the namespace's, live
            raw_workloads, _ = await self.kube.list(WORKLOADS, namespace)
            listed = [observe_workload(w) for w in raw_workloads]
            return [w for w in listed if w.of_deployment(pod_uids=pod_uids, groups=groups)]
        found: dict[str, dict[str, Any]] = {}
        for pod_uid in pod_uids:
            for raw in cache.by_index(WORKLOADS_BY_POD, pod_uid):
                found[object_key(raw)] = raw
        for group in groups:
            raw_named = cache.get(f"{namespace}/{group}")
            if raw_named is not None:
                found[object_key(raw_named)] = raw_named
        workloads = [
            observe_workload(raw)
            for key, raw in sorted(found.items())
            if key.partition("/")[0] == namespace
        ]
        return [w for w in workloads if w.of_deployment(pod_uids=pod_uids, groups=groups)]

    # ---- converge ---------------------------------------------------------------------------

    async def _converge(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        namespace = md.metadata.namespace
        inputs = await self._inputs(md)
        self._log_unreadable(inputs)
        for bad in inputs.unreadable:
            await self.recorder.record(raw, bad.event())
        if inputs.raw_binding is not None:
            await self._claim(inputs.raw_binding, md.metadata.name)
        settings = self.settings()
        stored_scalers = await self._scalers(md)
        scaling = resolve_scaling(
            md,
            scalers=observed_scalers(
                (s for s in stored_scalers.values() if s is not None), owner_uid=md.metadata.uid
            ),
        )
        try:
            with paused_gc():
                rendering = render(
                    md, lookups=inputs.lookups, settings=settings, counts=scaling.counts()
                )
        except RenderError as exc:
            await self.recorder.record(raw, events.render_failed(exc))
            await self._report_render_failure(md, exc)
            raise
        desired = desired_from_rendering(rendering, scaling.targets)
        meta = md.metadata
        pods, workloads = await self._observed(namespace, meta.name, meta.uid, desired.groups)
        index = ReplicaIndex.of(pods, workloads)
        conflicts = await self._ensure_local_queues(rendering)
        step = plan(
            desired=desired,
            index=index,
            replacing=remembered_replacing(md),
            cache_hold=cache_hold(md, rendering.cache),
            blocked_queues={c.name for c in conflicts},
        )
        stored = md.status
        if step.persist_first:
            # Remember the replacement before deleting it (D6): a restart resumes it.
            stored = with_replacing(md, step.replacing)
            await self._write_status(md, stored)
        await self._delete(namespace, step)
        created, create_error = await self._create(rendering, step)
        scaler_sync = sync_scalers(
            rendering.scalers, stored=stored_scalers, owner_uid=md.metadata.uid
        )
        await self._keep_scalers(md, raw, scaler_sync, stored_scalers)
        if step.delete_pods or step.delete_workloads or create_error is not None:
            after = await self._observe(md)
        else:
            # Nothing deleted: what the pass saw, with the Pods it created as the API server
            # answered them, is what a fresh observation would find (the Workloads named only
            # after a declared group left out, as it would).
            pods = [*pods, *(observe_pod(p, owner_uid=meta.uid) for p in created)]
            uids = {p.uid for p in pods}
            after = ReplicaIndex.of(
                pods, [w for w in workloads if w.of_deployment(pod_uids=uids, groups=frozenset())]
            )
        service_error = await self._sync_services(md, rendering, after)
        router, router_error = await self.routers.sync(md, rendering)
        new_status = deployment_status(
            md.model_copy(update={"status": stored}),
            rendering=rendering,
            index=after,
            plan=step,
            system_namespace=settings.system_namespace,
            now=self.now(),
            queue_conflicts=[c.message for c in conflicts],
            router=router,
            scaling=scaling,
        )
        if status_changed(stored, new_status):
            await self._write_status(md, new_status)
        # The deployment's status remembers a held count before its scaler goes (D27).
        for name, uid in scaler_sync.delete:
            await self.kube.delete(SCALERS, name, namespace, uid=uid or None)
        await self._write_scaler_statuses(md, rendering, after, scaling, stored_scalers)
        self.gauges.observe(namespace, md.metadata.name, new_status)
        for event in events.departure_events(md, after.pods, seen_before=index.pods):
            await self.recorder.record(raw, event)
        for conflict in conflicts:
            await self.recorder.record(raw, events.local_queue_conflict(conflict.message))
        error = create_error or service_error or router_error
        if error is not None:
            raise error
        if requeue_after(step, after):
            return HOLD_SECONDS
        return QUEUE_RECHECK_SECONDS if conflicts else None

    async def _report_render_failure(self, md: ModelDeployment, error: RenderError) -> None:
        """Write the status of a generation that cannot be rendered when it changed
        (:func:`~gpustack_render.reconcile.status.render_failed_status`, from the Pods as they
        are now); nothing else is touched."""
        failed = render_failed_status(md, error, index=await self._observe(md), now=self.now())
        if status_changed(md.status, failed):
            await self._write_status(md, failed)
        self.gauges.observe(md.metadata.namespace, md.metadata.name, failed)

    # ---- scalers (D27) -------------------------------------------------------------------

    async def _scalers(self, md: ModelDeployment) -> dict[str, dict[str, Any] | None]:
        """The stored scaler of every name the deployment's scalers have or had, looked up by
        name (no scan of the namespace). A synced cache answers alone: most candidates do not
        exist, and a live read of each on every pass would cost a request per role; a scaler
        this pass creates that the cache has not seen yet answers the create with 409, and the
        watch event brings the deployment back."""
        namespace = md.metadata.namespace
        informer = self.caches.scalers
        out: dict[str, dict[str, Any] | None] = {}
        for name in scaler_candidates(md):
            if informer is not None and informer.synced.is_set():
                out[name] = informer.get(f"{namespace}/{name}")
            else:
                out[name] = await self.kube.get(SCALERS, name, namespace)
        return out

    async def _keep_scalers(
        self,
        md: ModelDeployment,
        raw: dict[str, Any],
        sync: ScalerSync,
        stored: dict[str, dict[str, Any] | None],
    ) -> None:
        """Create the missing scalers, align the drifted ones (never ``spec.replicas``), and
        report a name held by another owner."""
        namespace = md.metadata.namespace
        for manifest in sync.create:
            name = str(manifest["metadata"]["name"])
            try:
                stored[name] = await self.kube.create(SCALERS, manifest, namespace)
            except ApiError as exc:
                if not exc.conflict:
                    raise
        for name, body in sync.patch:
            stored[name] = await self.kube.merge_patch(SCALERS, name, body, namespace)
        for name in sync.conflicts:
            await self.recorder.record(
                raw, events.scaler_conflict(namespace, name, md.metadata.name)
            )

    async def _write_scaler_statuses(
        self,
        md: ModelDeployment,
        rendering: Rendering,
        after: ReplicaIndex,
        scaling: ScalingState,
        stored: dict[str, dict[str, Any] | None],
    ) -> None:
        """Each owned scaler's status, written only when it changed."""
        namespace, deployment = md.metadata.namespace, md.metadata.name
        for target in scaling.targets:
            name = target.scaler_name(deployment)
            obj = stored.get(name)
            if obj is None or not ownerrefs.controlled_by(obj, md.metadata.uid):
                continue
            previous = stored_status(obj)
            generation = (obj.get("metadata") or {}).get("generation")
            status = scaler_status(
                target,
                deployment=deployment,
                units=scaling.applied[target.name],
                rendering=rendering,
                index=after,
                previous=previous,
                generation=generation if isinstance(generation, int) else None,
                now=self.now(),
            )
            if not scaler_status_changed(previous, status):
                continue
            await self.kube.apply(
                SCALERS,
                {
                    "apiVersion": SCALERS.api_version,
                    "kind": SCALERS.kind,
                    "metadata": {"name": name, "namespace": namespace},
                    "status": scaler_status_json(status),
                },
                field_manager=FIELD_MANAGER,
                namespace=namespace,
                subresource="status",
            )

    async def _write_status(self, md: ModelDeployment, status: ModelDeploymentStatus) -> None:
        await self._write_status_of(md.metadata.namespace, md.metadata.name, status)

    async def _write_status_of(
        self, namespace: str, name: str, status: ModelDeploymentStatus
    ) -> None:
        body = {
            "apiVersion": MODEL_DEPLOYMENTS.api_version,
            "kind": MODEL_DEPLOYMENTS.kind,
            "metadata": {"name": name, "namespace": namespace},
            "status": status_to_json(status),
        }
        await self.kube.apply(
            MODEL_DEPLOYMENTS,
            body,
            field_manager=FIELD_MANAGER,
            namespace=namespace,
            subresource="status",
        )

    async def _delete(self, namespace: str, step: RolloutStep) -> None:
        """Pods (default grace, uid precondition), then their Workloads; NotFound is success."""
        results = await bounded(
            partial(self.kube.delete, PODS, p.name, namespace, uid=p.uid) for p in step.delete_pods
        )
        _raise_first(results)
        metrics.POD_WRITES.labels("delete").inc(len(step.delete_pods))
        results = await bounded(
            partial(self.kube.delete, WORKLOADS, w, namespace) for w in step.delete_workloads
        )
        _raise_first(results)

    async def _create(
        self, rendering: Rendering, step: RolloutStep
    ) -> tuple[list[dict[str, Any]], BaseException | None]:
        """Every member Pod of each seat the planner scheduled; continue past failures. The
        Pods created, as the API server answered them, and the first failure."""
        manifests: list[dict[str, Any]] = []
        for seat in step.create:
            role = rendering.role(seat.role)
            if role is None:
                continue
            manifests.extend(s.pod for s in role.instance(seat.ordinal))
        results = await bounded(
            partial(self.kube.create, PODS, m, rendering.namespace) for m in manifests
        )
        created = [r for r in results if not isinstance(r, BaseException)]
        metrics.POD_WRITES.labels("create").inc(len(created))
        return created, next((r for r in results if isinstance(r, BaseException)), None)

    async def _ensure_local_queues(self, rendering: Rendering) -> list[QueueConflict]:
        """Create each LocalQueue the deployment needs when missing (409: it exists now),
        looked up afresh on every pass, before the pass plans; never patch or delete one
        (D16). The ones feeding another ClusterQueue are returned, not changed: the planner
        creates no Pod of a role using one."""
        conflicts: list[QueueConflict] = []
        for queue in rendering.local_queues:
            name = str(queue["metadata"]["name"])
            stored = await self._local_queue(name, rendering.namespace)
            if stored is None:
                try:
                    await self.kube.create(LOCAL_QUEUES, queue, rendering.namespace)
                except ApiError as exc:
                    if not exc.conflict:
                        raise
                continue
            conflict = queue_conflict(queue, stored)
            if conflict is not None:
                conflicts.append(conflict)
        return conflicts

    async def _local_queue(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The stored LocalQueue: from the cache when it holds it (a LocalQueue is never
        patched or deleted by the controller, and its ``spec.clusterQueue`` is immutable), else
        live (a miss may be one created a moment ago)."""
        cache = self.caches.local_queues
        if cache is not None:
            cached = cache.get(f"{namespace}/{name}")
            if cached is not None:
                return cached
        return await self.kube.get(LOCAL_QUEUES, name, namespace)

    async def _sync_services(
        self, md: ModelDeployment, rendering: Rendering, after: ReplicaIndex
    ) -> BaseException | None:
        """Apply the rendered Services that are not aligned, prune the ones no longer
        rendered (:func:`~gpustack_render.reconcile.servicesync.sync_services`); a Service
        held by another owner is never written: its conflict is returned, and fails the pass
        once the rest is done."""
        namespace = md.metadata.namespace
        wanted = rendering.services()
        names = [str(service["metadata"]["name"]) for service in wanted]
        reads = await asyncio.gather(
            *(self._read(self.caches.services, name, namespace) for name in names)
        )
        stored: dict[str, dict[str, Any] | None] = dict(zip(names, reads, strict=True))
        sync = sync_services(
            wanted,
            stored=stored,
            # Only this deployment's: the ones it controls are the only ones it may prune.
            others=self.caches.services.by_index(SERVICES_BY_OWNER, md.metadata.uid),
            namespace=namespace,
            owner=md.metadata.name,
            owner_uid=md.metadata.uid,
            pods=after.pods,
            manager=FIELD_MANAGER,
        )
        _raise_first(
            await bounded(
                partial(
                    self.kube.apply,
                    SERVICES,
                    service,
                    field_manager=FIELD_MANAGER,
                    namespace=namespace,
                )
                for service in sync.apply
            )
        )
        _raise_first(
            await bounded(
                partial(self.kube.delete, SERVICES, name, namespace, uid=uid or None)
                for name, uid in sync.prune
            )
        )
        return sync.conflicts[0] if sync.conflicts else None

    async def _claim(self, raw_binding: dict[str, Any], deployment: str) -> None:
        wanted = claims.claim_on(raw_binding, deployment)
        if wanted is not None:
            await self._write_used_by(raw_binding, wanted)

    async def _write_used_by(
        self, raw_binding: dict[str, Any], used_by: list[dict[str, Any]]
    ) -> None:
        meta = raw_binding["metadata"]
        await self.kube.merge_patch(
            BINDINGS,
            str(meta["name"]),
            {
                "metadata": {"resourceVersion": meta.get("resourceVersion")},
                "status": {"usedBy": used_by},
            },
            str(meta["namespace"]),
            subresource="status",
        )

    # ---- teardown ---------------------------------------------------------------------------

    async def _unreadable(
        self, key: str, raw: dict[str, Any], errs: Iterable[object]
    ) -> float | None:
        """A stored deployment that does not decode: an Event naming why; a deleted one is
        still torn down from its metadata (its Pods, Workloads, claim and finalizer), so it
        cannot hold them for ever. Looked at again later: a status-only fix moves no
        generation, so no watch event would bring it back."""
        problems = [str(e) for e in errs]
        log.error("cannot read ModelDeployment %s: %s", key, "; ".join(problems))
        meta = raw.get("metadata") or {}
        deleting = meta.get("deletionTimestamp") is not None
        await self.recorder.record(raw, events.deployment_unreadable(problems, deleting=deleting))
        if not deleting:
            return QUEUE_RECHECK_SECONDS
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        index = await self._observe_named(namespace, name, str(meta.get("uid") or ""))
        return await self._run_teardown(
            namespace, name, raw, plan_unreadable_teardown(raw, index=index)
        )

    async def _teardown(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        step = plan_teardown(md, index=await self._observe(md), now=self.now())
        return await self._run_teardown(md.metadata.namespace, md.metadata.name, raw, step)

    async def _run_teardown(
        self, namespace: str, name: str, raw: dict[str, Any], step: Draining | Releasing | None
    ) -> float | None:
        if step is None:
            return None
        if isinstance(step, Draining):
            if step.status is not None:
                await self._write_status_of(namespace, name, step.status)
                self.gauges.observe(namespace, name, step.status)
            results = await bounded(
                partial(self.kube.delete, PODS, p.name, namespace, uid=p.uid)
                for p in step.delete_pods
            )
            _raise_first(results)
            results = await bounded(
                partial(self.kube.delete, WORKLOADS, w, namespace) for w in step.delete_workloads
            )
            _raise_first(results)
            return HOLD_SECONDS
        if step.binding is not None:
            raw_binding = await self.kube.get(BINDINGS, step.binding, namespace)
            if raw_binding is not None:
                remaining = claims.release_from(raw_binding, name)
                if remaining is not None:
                    await self._write_used_by(raw_binding, remaining)
        if step.finalizers is not None:
            try:
                await self.kube.replace(
                    MODEL_DEPLOYMENTS,
                    {**raw, "metadata": {**raw["metadata"], "finalizers": step.finalizers}},
                    namespace,
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
        self.recorder.forget(namespace, name)
        self.gauges.forget(namespace, name)
        return None


def _raise_first(results: Sequence[object]) -> None:
    for result in results:
        if isinstance(result, BaseException):
            raise result
