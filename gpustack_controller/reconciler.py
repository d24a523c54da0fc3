"""The ModelDeployment reconcile pass: read, render, plan, execute per kind, status
(docs/contract/controller.md §3–§12; docs/architecture.md).

Every decision comes from the library (:mod:`gpustack_render.reconcile`: the input graph, the
rollout plan, the owned-object plan, status, events, claims, the teardown plan; and ``render``);
this module fetches what they ask for, calls them, and writes what they return. A pass:

1. **read**: gets the deployment (gone → done; not decodable or deleted → ``teardown.py``; no
   finalizer → add it), fetches the objects the input graph asks for (cache first, then live;
   a stored object that does not decode is a failed read), claims the Binding
   (``status.usedBy``), reads the stored scalers (they set autoscaled roles' counts);
2. **weights** (D28): while the artifact's weights cannot be delivered (missing, unresolved,
   an unbound claim, no node plugin …), the held status and nothing else: no Pod is created,
   replaced or deleted; **render** (a render error → a ``RenderFailed`` event and the failed
   generation's status, then a retry);
3. **plan**: observes the Pods (live) and their Workloads (``observe.py``), creates the missing
   LocalQueues (the ones found feeding another ClusterQueue block their roles), plans the
   rollout, persists a newly chosen replacement;
4. **execute per kind**: deletes Pods then Workloads, creates whole seats, then each owned kind
   on the one owned-object path (``owned.py``): scalers, Services, the router's objects;
5. **status**: writes it when it changed, then the owned kinds' prunes, the scalers' status,
   events; raises the first failure of the pass (the work queue retries it with backoff) and
   returns the requeue delay (2 s while anything is held or in flight).

A pass that changes nothing writes nothing: a status equal to the stored one, an aligned Service
and an unchanged Binding claim are not sent, so a converged cluster sees reads only. Nothing in a
pass walks every deployment or every object of a kind: its own Pods are listed by label, its
Services and Workloads are read through the caches' indexes.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Final

from gpustack_controller import metrics
from gpustack_controller.caches import Caches, InputReader, OwnedKinds
from gpustack_controller.deployments import DeploymentReads
from gpustack_controller.elastic import ElasticPass, ElasticStep
from gpustack_controller.kube import (
    MODEL_DEPLOYMENTS,
    PODS,
    SCALERS,
    WORKLOADS,
    Kube,
)
from gpustack_controller.observe import SERVICES_BY_OWNER, Observer, controller_uid
from gpustack_controller.owned import (
    OwnedResult,
    OwnedWriter,
    bounded,
    failures,
)
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.teardown import HOLD_SECONDS, Teardown, raise_first, write_used_by
from gpustack_kube.cachedread import CachedReader
from gpustack_kube.gcpause import paused_gc
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.core import ownerrefs
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.elastic.status import kept_resize_condition
from gpustack_render.reconcile import claims, events
from gpustack_render.reconcile.inputs import InputGraph
from gpustack_render.reconcile.keys import FIELD_MANAGER, split_key
from gpustack_render.reconcile.observed import observe_pod
from gpustack_render.reconcile.owned import (
    Owner,
    PassFacts,
)
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.rollout import RolloutStep, acts, plan, requeue_after
from gpustack_render.reconcile.rolloutinputs import (
    cache_hold,
    desired_from_rendering,
    remembered_replacing,
    with_replacing,
)
from gpustack_render.reconcile.routerstate import RouterObservation, observe_router
from gpustack_render.reconcile.scalerstatus import (
    scaler_status,
    scaler_status_changed,
    scaler_status_json,
    stored_status,
)
from gpustack_render.reconcile.scaling import (
    ScalingState,
    observed_scalers,
    resolve_scaling,
    scaler_candidates,
)
from gpustack_render.reconcile.status import (
    deployment_status,
    render_failed_status,
    status_changed,
    status_to_json,
    weights_held_status,
)
from gpustack_render.rendering.elastic import ElasticMasterUnreadableError, has_elastic
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import LookupFailed
from gpustack_render.weights.delivery import WeightsBlock, weights_of

__all__ = ["FIELD_MANAGER", "Caches", "DeploymentReconciler"]

log = logging.getLogger(__name__)

#: A LocalQueue found feeding another ClusterQueue is looked at again this often.
QUEUE_RECHECK_SECONDS: Final = 60.0


def utc_now() -> str:
    """The wall clock as RFC 3339 (seconds, UTC): what conditions carry."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
        self.reader = CachedReader(kube)
        #: The pass's deployment: the cache, or our last write's answer when newer.
        self.deployments = DeploymentReads(kube, caches.deployments)
        self.observer = Observer(kube, caches.workloads, caches.pods)
        self.owned = OwnedWriter(kube)
        self.elastic = ElasticStep(kube, self.owned)
        self.teardown = Teardown(
            kube,
            self.observer,
            recorder,
            write_status=self._write_status_of,
            gauges=gauges,
            now=now,
        )
        self.inputs = InputReader(self.reader, caches)

    async def __call__(self, key: str) -> float | None:
        namespace, name = split_key(key)
        raw = await self.deployments.get(namespace, name)
        if raw is None:
            self.deployments.forget(key)
            self.recorder.forget(namespace, name)
            self.gauges.forget(namespace, name)
            return None
        md, errs = decode_deployment(raw)
        if md is None:
            return await self.teardown.unreadable(key, raw, errs)
        if md.metadata.deletion_timestamp is not None:
            return await self.teardown.deleted(md, raw)
        finalizers = claims.with_finalizer(md.metadata.finalizers)
        if finalizers is not None:
            raw = await self.kube.replace(
                MODEL_DEPLOYMENTS, claims.with_finalizers(raw, finalizers), namespace
            )
            self.deployments.wrote(raw)
            md, _ = decode_deployment(raw)
            assert md is not None
        return await self._converge(md, raw)

    def _kinds(self) -> OwnedKinds:
        """The owned kinds over the caches as they are now (an InferencePool informer is added
        once the controller finds the kind served)."""
        return OwnedKinds.of(self.caches)

    async def _read(self, md: ModelDeployment, raw: dict[str, Any]) -> InputGraph:
        """The render's inputs (an Event per unreadable one) and the Binding's claim."""
        inputs = await self.inputs.read(md)
        for bad in inputs.unreadable:
            await self.recorder.record(raw, bad.event())
        if inputs.raw_binding is not None:
            wanted = claims.claim_on(inputs.raw_binding, md.metadata.name)
            if wanted is not None:
                await write_used_by(self.kube, inputs.raw_binding, wanted)
        return inputs

    # ---- the pass -----------------------------------------------------------------------------

    async def _converge(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        meta = md.metadata
        namespace, owner = meta.namespace, Owner(meta.namespace, meta.name, meta.uid)
        inputs = await self._read(md, raw)
        settings = self.settings()
        kinds = self._kinds()
        scalers = await self.owned.stored(kinds.scalers, scaler_candidates(md), namespace)
        scaling = resolve_scaling(
            md,
            scalers=observed_scalers((s for s in scalers.values() if s), owner_uid=meta.uid),
        )
        # weights: while they cannot be delivered nothing is created, replaced or deleted
        try:
            weights = weights_of(md, lookups=inputs.lookups, settings=settings)
        except LookupFailed:
            weights = None  # the render fails on the same read and says so
        if isinstance(weights, WeightsBlock):
            await self._hold_for_weights(md, weights)
            return None
        # render (an Elastic EP master keeps the boot width it was created with)
        elastic = has_elastic(md)
        raw_pods = await self.elastic.pods(md) if elastic else None
        masters = self.elastic.masters(md, raw_pods) if raw_pods is not None else ()
        try:
            with paused_gc():
                rendering = render(
                    md,
                    lookups=inputs.lookups,
                    settings=settings,
                    counts=scaling.counts(),
                    elastic_masters=masters,
                )
        except ElasticMasterUnreadableError as exc:
            # Not a failure of the spec: hold (nothing created or deleted) and look again.
            await self._report_render_failure(md, exc)
            return HOLD_SECONDS
        except RenderError as exc:
            await self.recorder.record(raw, events.render_failed(exc))
            await self._report_render_failure(md, exc)
            raise
        # plan
        desired = desired_from_rendering(rendering, scaling.targets)
        # The caches first; a plan that would act (or hold) is made again on a live list.
        cached = (
            self.observer.cached(namespace, meta.name, meta.uid, desired.groups)
            if raw_pods is None
            else None
        )
        pods, workloads = cached or await self.observer.observed(
            namespace, meta.name, meta.uid, desired.groups, raw_pods=raw_pods
        )
        index = ReplicaIndex.of(pods, workloads)
        queues = await self.owned.sync(kinds.local_queues, rendering.local_queues, owner=owner)
        planned = partial(
            plan,
            desired=desired,
            replacing=remembered_replacing(md),
            cache_hold=cache_hold(md, rendering.cache),
            blocked_queues={c.name for c in queues.plan.conflicts},
        )
        step = planned(index=index)
        live = cached is None or acts(step)
        metrics.POD_OBSERVATIONS.labels("live" if live else "cache").inc()
        if cached is not None and live:
            pods, workloads = await self.observer.observed(
                namespace, meta.name, meta.uid, desired.groups
            )
            index = ReplicaIndex.of(pods, workloads)
            step = planned(index=index)
        stored = md.status
        if step.persist_first:
            # Remember the replacement before deleting it (D6): a restart resumes it.
            stored = with_replacing(md, step.replacing)
            await self._write_status(md, stored)
        # execute per kind
        await self._delete(namespace, step)
        created, create_errors = await self._create(rendering, step)
        if elastic:
            created += await self.elastic.keep_head(rendering, pods)
        scaler_pass = await self.owned.sync(
            kinds.scalers, rendering.scalers, owner=owner, stored=scalers
        )
        if step.delete_pods or step.delete_workloads or create_errors:
            after = await self.observer.index(md)
        else:
            # Nothing deleted: what the pass saw, with the Pods it created as the API server
            # answered them, is what a fresh observation would find (the Workloads named only
            # after a declared group left out, as it would).
            pods = [*pods, *(observe_pod(p, owner_uid=meta.uid) for p in created)]
            uids = {p.uid for p in pods}
            after = ReplicaIndex.of(
                pods, [w for w in workloads if w.of_deployment(pod_uids=uids, groups=frozenset())]
            )
        service_pass = await self.owned.sync(
            kinds.services,
            rendering.services(),
            owner=owner,
            facts=PassFacts(pods=after.pods),
        )
        router, router_passes = await self._router(kinds, rendering, owner)
        resize = (
            await self.elastic.resize(
                md,
                rendering,
                raw_pods=raw_pods or [],
                pods=after.pods,
                workloads=after.workloads,
            )
            if elastic
            else ElasticPass()
        )
        # status
        new_status = deployment_status(
            md.model_copy(update={"status": stored}),
            rendering=rendering,
            index=after,
            plan=step,
            system_namespace=settings.system_namespace,
            now=self.now(),
            queue_conflicts=[c.message for c in queues.plan.conflicts],
            router=router,
            scaling=scaling,
            weights=weights,
        )
        new_status = resize.status(new_status, stored, generation=meta.generation, now=self.now())
        if status_changed(stored, new_status):
            await self._write_status(md, new_status)
        # The status remembers what goes (a held count before its scaler goes, D27) first.
        passes = [queues, scaler_pass, service_pass, *router_passes]
        errors: list[BaseException] = [*create_errors, *resize.errors]
        for owned in passes:
            errors += await self.owned.prune(owned)
        await self._write_scaler_statuses(md, rendering, after, scaling, scaler_pass)
        self.gauges.observe(namespace, meta.name, new_status)
        for event in events.departure_events(md, after.pods, seen_before=index.pods):
            await self.recorder.record(raw, event)
        for owned in passes:
            errors += await self._conflicts(raw, owned)
        if errors:
            raise errors[0]
        if requeue_after(step, after):
            return HOLD_SECONDS
        return resize.requeue or (QUEUE_RECHECK_SECONDS if queues.plan.conflicts else None)

    async def _conflicts(self, raw: dict[str, Any], owned: OwnedResult) -> list[BaseException]:
        """Record each conflict's event (when its policy names one); the failures the pass
        raises: the writes that failed, and the conflicts of a policy whose conflicts fail it."""
        policy = owned.kind.policy
        for conflict in owned.plan.conflicts:
            if policy.conflict_event:
                await self.recorder.record(
                    raw, events.conflict_event(policy.conflict_event, conflict)
                )
        return [
            f
            for f in owned.failures
            if policy.conflicts_fail or not isinstance(f, ownerrefs.OwnedConflict)
        ]

    async def _router(
        self, kinds: OwnedKinds, rendering: Rendering, owner: Owner
    ) -> tuple[RouterObservation | None, list[OwnedResult]]:
        """The router's objects on the owned-object path, and what its Deployment says. A router
        that cannot be rendered (no image, say) is neither written nor pruned: a router already
        running keeps running while status says why."""
        router = rendering.router
        if router is not None and router.failure is not None:
            return RouterObservation(False), []
        wanted = rendering.router_objects()
        passes = [
            await self.owned.sync(kind, [o for o in wanted if o["kind"] == name], owner=owner)
            for name, kind in kinds.router.items()
        ]
        if router is None:
            return None, passes
        deployment = next(p for p in passes if p.kind.policy.kind == "Deployment")
        return observe_router(deployment.current(router.object_name), owner_uid=owner.uid), passes

    async def _hold_for_weights(self, md: ModelDeployment, block: WeightsBlock) -> None:
        """Write the status of a deployment whose weights cannot be delivered when it changed
        (:func:`~gpustack_render.reconcile.status.weights_held_status`, from the Pods as they
        are now); nothing else is touched. The artifact's, the claim's and the driver's watches
        bring the deployment back when what blocks it changes."""
        held = weights_held_status(md, block, index=await self.observer.index(md), now=self.now())
        held = kept_resize_condition(held, md.status)
        if status_changed(md.status, held):
            await self._write_status(md, held)
        self.gauges.observe(md.metadata.namespace, md.metadata.name, held)

    async def _report_render_failure(self, md: ModelDeployment, error: RenderError) -> None:
        """Write the status of a generation that cannot be rendered when it changed
        (:func:`~gpustack_render.reconcile.status.render_failed_status`, from the Pods as they
        are now); nothing else is touched."""
        failed = render_failed_status(
            md, error, index=await self.observer.index(md), now=self.now()
        )
        failed = kept_resize_condition(failed, md.status)
        if status_changed(md.status, failed):
            await self._write_status(md, failed)
        self.gauges.observe(md.metadata.namespace, md.metadata.name, failed)

    # ---- execute ------------------------------------------------------------------------------

    async def _delete(self, namespace: str, step: RolloutStep) -> None:
        """Pods (default grace, uid precondition), then their Workloads; NotFound is success."""
        raise_first(
            await bounded(
                partial(self.kube.delete, PODS, p.name, namespace, uid=p.uid)
                for p in step.delete_pods
            )
        )
        metrics.POD_WRITES.labels("delete").inc(len(step.delete_pods))
        raise_first(
            await bounded(
                partial(self.kube.delete, WORKLOADS, w, namespace) for w in step.delete_workloads
            )
        )

    async def _create(
        self, rendering: Rendering, step: RolloutStep
    ) -> tuple[list[dict[str, Any]], list[BaseException]]:
        """Every member Pod of each seat the planner scheduled; continue past failures. The
        Pods created, as the API server answered them, and the failures."""
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
        return created, failures(results)

    # ---- status -------------------------------------------------------------------------------

    async def _write_scaler_statuses(
        self,
        md: ModelDeployment,
        rendering: Rendering,
        after: ReplicaIndex,
        scaling: ScalingState,
        scalers: OwnedResult,
    ) -> None:
        """Each owned scaler's status, written only when it changed."""
        namespace, deployment = md.metadata.namespace, md.metadata.name
        for target in scaling.targets:
            name = target.scaler_name(deployment)
            obj = scalers.current(name)
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
                _status_body(SCALERS.api_version, SCALERS.kind, name, namespace)
                | {"status": scaler_status_json(status)},
                field_manager=FIELD_MANAGER,
                namespace=namespace,
                subresource="status",
            )

    async def _write_status(self, md: ModelDeployment, status: ModelDeploymentStatus) -> None:
        await self._write_status_of(md.metadata.namespace, md.metadata.name, status)

    async def _write_status_of(
        self, namespace: str, name: str, status: ModelDeploymentStatus
    ) -> None:
        answered = await self.kube.apply(
            MODEL_DEPLOYMENTS,
            _status_body(MODEL_DEPLOYMENTS.api_version, MODEL_DEPLOYMENTS.kind, name, namespace)
            | {"status": status_to_json(status)},
            field_manager=FIELD_MANAGER,
            namespace=namespace,
            subresource="status",
        )
        self.deployments.wrote(answered)


def _status_body(api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any]:
    """The identity an apply to a status subresource carries."""
    body: Mapping[str, Any] = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
    }
    return dict(body)
