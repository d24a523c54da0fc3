"""The ModelDeployment reconcile pass: fetch, render, plan, apply (controller.md §3–§12).

Every decision comes from the library (``render``, ``rollout.plan``, ``status``, ``events``,
``claims``); this module only reads what they need and writes what they return, in the order
the planner documents. A pass:

1. gets the deployment (gone → done); a ``deletionTimestamp`` → teardown; no finalizer → add
   it with an update;
2. claims the Binding (``status.usedBy``), renders (a render error → ``RenderFailed`` and a
   retry, no status write);
3. lists the Pods and Workloads from the API server (uncached: the create gate must see every
   Pod that still holds a group name), plans, persists a newly chosen replacement, deletes Pods
   then Workloads, creates whole seats, applies LocalQueues and Services;
4. re-lists, writes the status through the status subresource when it changed, records events;
5. returns the requeue delay (2 s while anything is held or in flight).
"""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final, TypeVar

from gpustack_controller import metrics
from gpustack_controller.kube import (
    BINDINGS,
    LOCAL_QUEUES,
    MODEL_DEPLOYMENTS,
    PODS,
    SERVICES,
    WORKLOADS,
    ApiError,
    Kube,
)
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.watches import Informer
from gpustack_render.api.inputs import (
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.api.modeldeployment import ModelDeployment, ModelDeploymentStatus
from gpustack_render.cli.gcpause import paused_gc
from gpustack_render.core import labels
from gpustack_render.core.errors import RenderError
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile import claims, events
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    controlled_by,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.rollout import Plan, plan
from gpustack_render.reconcile.status import (
    cache_hold,
    deleting_status,
    deployment_status,
    desired_from_rendering,
    status_to_json,
    with_replacing,
)
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

log = logging.getLogger(__name__)

#: The one field manager of the controller's own writes (Services, LocalQueues, status).
FIELD_MANAGER: Final = "gpustack-controller"
#: Requeue while anything is held or in flight (controller.md §4 step 11).
HOLD_SECONDS: Final = 2.0
#: Concurrent writes of one pass.
WRITE_CONCURRENCY: Final = 32

T = TypeVar("T")


def utc_now() -> str:
    """The wall clock as RFC 3339 (seconds, UTC): what conditions carry."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment_selector(name: str) -> str:
    """The label selector of a deployment's Pods and Services (name + instance)."""
    return ",".join(f"{k}={v}" for k, v in labels.deployment_selector(name).items())


def split_key(key: str) -> tuple[str, str]:
    namespace, _, name = key.partition("/")
    return namespace, name


async def bounded(
    jobs: Iterable[Callable[[], Awaitable[T]]], *, limit: int = WRITE_CONCURRENCY
) -> list[T | BaseException]:
    """Run ``jobs`` with at most ``limit`` in flight; results or exceptions, in order."""
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[T]]) -> T:
        async with gate:
            return await job()

    return list(await asyncio.gather(*(one(j) for j in jobs), return_exceptions=True))


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
    ) -> None:
        self.kube = kube
        self.caches = caches
        self.recorder = recorder
        self.settings = settings
        self.now = now
        self._queues_ensured: set[tuple[str, str]] = set()

    async def __call__(self, key: str) -> float | None:
        namespace, name = split_key(key)
        raw = await self.kube.get(MODEL_DEPLOYMENTS, name, namespace)
        if raw is None:
            self.recorder.forget(namespace, name)
            return None
        md, errs = decode_deployment(raw)
        if md is None:
            log.error("cannot read ModelDeployment %s: %s", key, "; ".join(map(str, errs)))
            return None
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

    async def _lookups(self, md: ModelDeployment) -> tuple[StaticLookups, dict[str, Any] | None]:
        """The objects the render reads, and the raw Binding (for the claim)."""
        namespace = md.metadata.namespace
        out = StaticLookups()
        for role in md.spec.roles:
            if role.instance_type in out.instance_types:
                continue
            obj = await self._read(self.caches.instance_types, role.instance_type)
            it, _ = decode_model(InstanceType, obj) if obj is not None else (None, None)
            if it is not None:
                out.instance_types[role.instance_type] = it
        raw_binding = None
        if md.spec.kv_cache is not None and md.spec.kv_cache.pool_ref.name:
            ref = md.spec.kv_cache.pool_ref.name
            raw_binding = await self._read(self.caches.bindings, ref, namespace)
            binding, _ = (
                decode_model(KVCachePoolBinding, raw_binding)
                if raw_binding is not None
                else (None, None)
            )
            if binding is not None:
                out.bindings[(namespace, ref)] = binding
                pool_obj = await self._read(self.caches.pools, binding.spec.pool_ref.name)
                pool, _ = decode_model(KVCachePool, pool_obj) if pool_obj else (None, None)
                if pool is not None:
                    out.pools[pool.name] = pool
                    if pool.spec.backends:
                        backend_obj = await self._read(self.caches.backends, pool.spec.backends[0])
                        backend, _ = (
                            decode_model(KVCacheBackend, backend_obj)
                            if backend_obj
                            else (None, None)
                        )
                        if backend is not None:
                            out.backends[backend.name] = backend
        return out, raw_binding

    async def _observe(
        self, md: ModelDeployment
    ) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
        """Every Pod carrying the deployment's selector and the namespace's Workloads, as the
        API server holds them now."""
        namespace = md.metadata.namespace
        raw_pods, _ = await self.kube.list(
            PODS, namespace, label_selector=deployment_selector(md.metadata.name)
        )
        pods = [observe_pod(p, owner_uid=md.metadata.uid) for p in raw_pods]
        uids = {p.uid for p in pods}
        raw_workloads, _ = await self.kube.list(WORKLOADS, namespace)
        workloads = [observe_workload(w) for w in raw_workloads]
        return pods, [w for w in workloads if w.owns_any(uids)]

    # ---- converge ---------------------------------------------------------------------------

    async def _converge(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        namespace, name = md.metadata.namespace, md.metadata.name
        lookups, raw_binding = await self._lookups(md)
        if raw_binding is not None:
            await self._claim(raw_binding, name)
        settings = self.settings()
        try:
            with paused_gc():
                rendering = render(md, lookups=lookups, settings=settings)
        except RenderError as exc:
            await self.recorder.record(raw, events.render_failed(exc))
            raise
        pods, workloads = await self._observe(md)
        step = plan(
            desired=desired_from_rendering(rendering),
            pods=pods,
            workloads=workloads,
            replacing={r.name: r.replacing for r in (md.status.roles or ())}
            if md.status is not None
            else {},
            cache_hold=cache_hold(md, rendering.cache),
        )
        stored = md.status
        if step.persist_first:
            # Remember the replacement before deleting it (D6): a restart resumes it.
            stored = with_replacing(md, step.replacing)
            await self._write_status(md, stored)
        await self._delete(namespace, step)
        create_error = await self._create(rendering, step)
        await self._ensure_local_queues(rendering)
        pods_after, workloads_after = await self._observe(md)
        service_error = await self._sync_services(md, rendering, pods_after)
        current = md.model_copy(update={"status": stored})
        new_status = deployment_status(
            current,
            rendering=rendering,
            pods=pods_after,
            workloads=workloads_after,
            plan=step,
            system_namespace=settings.system_namespace,
            now=self.now(),
        )
        if stored is None or status_to_json(new_status) != status_to_json(stored):
            await self._write_status(md, new_status)
        for event in events.departure_events(pods_after):
            await self.recorder.record(raw, event)
        error = create_error or service_error
        if error is not None:
            raise error
        if step.requeue or any(p.terminating for p in pods_after if p.owned):
            return HOLD_SECONDS
        return None

    async def _write_status(self, md: ModelDeployment, status: ModelDeploymentStatus) -> None:
        body = {
            "apiVersion": MODEL_DEPLOYMENTS.api_version,
            "kind": MODEL_DEPLOYMENTS.kind,
            "metadata": {"name": md.metadata.name, "namespace": md.metadata.namespace},
            "status": status_to_json(status),
        }
        await self.kube.apply(
            MODEL_DEPLOYMENTS,
            body,
            field_manager=FIELD_MANAGER,
            namespace=md.metadata.namespace,
            subresource="status",
        )

    async def _delete(self, namespace: str, step: Plan) -> None:
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

    async def _create(self, rendering: Rendering, step: Plan) -> BaseException | None:
        """Every member Pod of each scheduled seat; continue past failures, keep the first."""
        manifests: list[dict[str, Any]] = []
        for seat in step.create:
            role = rendering.role(seat.role)
            if role is None:
                continue
            manifests.extend(s.pod for s in role.instance(seat.ordinal))
        results = await bounded(
            partial(self.kube.create, PODS, m, rendering.namespace) for m in manifests
        )
        created = sum(1 for r in results if not isinstance(r, BaseException))
        metrics.POD_WRITES.labels("create").inc(created)
        return next((r for r in results if isinstance(r, BaseException)), None)

    async def _ensure_local_queues(self, rendering: Rendering) -> None:
        """Create each LocalQueue when missing (server-side apply, once per process); never
        delete one (D16)."""
        for queue in rendering.local_queues:
            key = (rendering.namespace, str(queue["metadata"]["name"]))
            if key in self._queues_ensured:
                continue
            await self.kube.apply(
                LOCAL_QUEUES, queue, field_manager=FIELD_MANAGER, namespace=rendering.namespace
            )
            self._queues_ensured.add(key)

    async def _sync_services(
        self, md: ModelDeployment, rendering: Rendering, pods: Sequence[ObservedPod]
    ) -> BaseException | None:
        """Apply every rendered Service that is not aligned with what is stored (a value
        differs, or this manager still owns a field the rendering no longer carries); prune
        owned Services no longer rendered (an instance Service only once no Pod of its ordinal
        remains)."""
        namespace, uid = md.metadata.namespace, md.metadata.uid
        wanted = rendering.services()
        names = {str(s["metadata"]["name"]) for s in wanted}
        error: BaseException | None = None
        for service in wanted:
            name = str(service["metadata"]["name"])
            existing = self.caches.services.get(f"{namespace}/{name}")
            if existing is None:
                existing = await self.kube.get(SERVICES, name, namespace)
            if existing is not None and not controlled_by(existing, uid):
                error = error or ApiError(
                    409,
                    "AlreadyExists",
                    f"Service {namespace}/{name} exists and is not owned by ModelDeployment "
                    f"{namespace}/{md.metadata.name}",
                )
                continue
            if existing is not None and service_aligned(existing, service, FIELD_MANAGER):
                continue
            await self.kube.apply(
                SERVICES, service, field_manager=FIELD_MANAGER, namespace=namespace
            )
        held = {(p.role, p.ordinal) for p in pods if p.owned}
        for existing in self.caches.services.items():
            meta = existing.get("metadata") or {}
            if meta.get("namespace") != namespace or meta.get("name") in names:
                continue
            if not controlled_by(existing, uid):
                continue
            selector = (existing.get("spec") or {}).get("selector") or {}
            ordinal = selector.get(labels.POD_ORDINAL)
            role = selector.get(labels.COMPONENT)
            if ordinal is not None and (role, _int(ordinal)) in held:
                continue  # peers of a terminating instance still resolve one another
            await self.kube.delete(SERVICES, str(meta.get("name")), namespace)
        return error

    async def _claim(self, raw_binding: dict[str, Any], deployment: str) -> None:
        used_by = (raw_binding.get("status") or {}).get("usedBy")
        wanted = claims.claimed(used_by, deployment)
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

    async def _teardown(self, md: ModelDeployment, raw: dict[str, Any]) -> float | None:
        if claims.FINALIZER not in md.metadata.finalizers:
            return None
        namespace, name = md.metadata.namespace, md.metadata.name
        pods, workloads = await self._observe(md)
        owned = [p for p in pods if p.owned]
        if owned:
            status = deleting_status(md, remaining=len(owned), now=self.now())
            if md.status is None or status_to_json(status) != status_to_json(md.status):
                await self._write_status(md, status)
            results = await bounded(
                partial(self.kube.delete, PODS, p.name, namespace, uid=p.uid)
                for p in owned
                if not p.terminating
            )
            _raise_first(results)
            # Only the Workloads of this deployment's own Pods (controller.md §12): a Pod that
            # merely carries the deployment's labels is not ours to release.
            owned_uids = {p.uid for p in owned}
            results = await bounded(
                partial(self.kube.delete, WORKLOADS, w.name, namespace)
                for w in workloads
                if w.owns_any(owned_uids)
            )
            _raise_first(results)
            return HOLD_SECONDS
        if md.spec.kv_cache is not None and md.spec.kv_cache.pool_ref.name:
            raw_binding = await self.kube.get(BINDINGS, md.spec.kv_cache.pool_ref.name, namespace)
            if raw_binding is not None:
                used_by = (raw_binding.get("status") or {}).get("usedBy")
                remaining = claims.released(used_by, name)
                if remaining is not None:
                    await self._write_used_by(raw_binding, remaining)
        finalizers = claims.without_finalizer(md.metadata.finalizers)
        if finalizers is not None:
            try:
                await self.kube.replace(
                    MODEL_DEPLOYMENTS,
                    {**raw, "metadata": {**raw["metadata"], "finalizers": finalizers}},
                    namespace,
                )
            except ApiError as exc:
                if not exc.not_found:
                    raise
        self.recorder.forget(namespace, name)
        return None


def _raise_first(results: Sequence[object]) -> None:
    for result in results:
        if isinstance(result, BaseException):
            raise result


def _int(text: object) -> int | None:
    try:
        return int(str(text))
    except ValueError:
        return None


def service_aligned(existing: Mapping[str, Any], wanted: Mapping[str, Any], manager: str) -> bool:
    """True when applying ``wanted`` as ``manager`` would change nothing in ``existing``.

    Two halves: every rendered field is stored with the rendered value (:func:`_covers`), and
    the field set ``manager`` owns through server-side apply (``metadata.managedFields``)
    names nothing the rendering dropped — a label, annotation, port or selector key removed
    from the rendering is still stored and still ours, and only a new apply removes it. A
    Service without an apply entry of ``manager`` is not known to be aligned.
    """
    if not _covers(existing, wanted):
        return False
    owned = _applied_fields(existing, manager)
    return owned is not None and not _owns_more(owned, wanted)


def _applied_fields(obj: Mapping[str, Any], manager: str) -> Mapping[str, Any] | None:
    """The ``fieldsV1`` set ``manager`` owns by apply on the main resource, if any."""
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        if (
            isinstance(entry, Mapping)
            and entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and not entry.get("subresource")
        ):
            fields = entry.get("fieldsV1")
            return fields if isinstance(fields, Mapping) else {}
    return None


def _owns_more(fields: Mapping[str, Any], wanted: Any) -> bool:
    """True when the ``fieldsV1`` set ``fields`` names a path ``wanted`` does not carry.

    ``f:<name>`` is a map field, ``k:<json>`` a list element by its key fields, ``v:<json>``
    a set element, ``i:<n>`` a list index and ``.`` the element itself.
    """
    for key, sub in fields.items():
        if key == ".":
            continue
        kind, _, rest = str(key).partition(":")
        child: Any
        if kind == "f":
            if not isinstance(wanted, Mapping) or rest not in wanted:
                return True
            child = wanted[rest]
        elif kind in ("k", "v", "i"):
            if not isinstance(wanted, list):
                return True
            try:
                ident = json.loads(rest)
            except ValueError:
                return True
            if kind == "k":
                match = [
                    e
                    for e in wanted
                    if isinstance(e, Mapping)
                    and isinstance(ident, Mapping)
                    and all(e.get(k) == v for k, v in ident.items())
                ]
            elif kind == "v":
                match = [e for e in wanted if e == ident]
            else:
                match = [wanted[ident]] if isinstance(ident, int) and ident < len(wanted) else []
            if not match:
                return True
            child = match[0]
        else:
            return True
        if isinstance(sub, Mapping) and sub and _owns_more(sub, child):
            return True
    return False


def _covers(existing: Any, wanted: Any) -> bool:
    """Every field of ``wanted`` is present with the same value in ``existing`` (server
    defaults may add more); lists must match element by element."""
    if isinstance(wanted, Mapping):
        return isinstance(existing, Mapping) and all(
            k in existing and _covers(existing[k], v) for k, v in wanted.items()
        )
    if isinstance(wanted, list):
        return (
            isinstance(existing, list)
            and len(existing) == len(wanted)
            and all(_covers(e, w) for e, w in zip(existing, wanted, strict=True))
        )
    return bool(existing == wanted)
