"""An in-memory API server for driving the controller's real reconcile pass in a unit test.

:class:`MemoryKube` answers the calls :class:`~gpustack_controller.reconciler.DeploymentReconciler`
makes (get, list with a label selector, create, replace, delete, merge patch, server-side apply
of objects and of the status subresource) from a dict, with uids, resource versions and
generations the way the API server assigns them (a replace carrying a stale resourceVersion and
a delete whose preconditions fail answer as the API server does); ``fail`` makes the next calls
of one verb on one kind raise an :class:`~gpustack_controller.kube.ApiError`. No watch: the
informers the pass reads are left empty (every read falls through to a live ``get``).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar, cast

from gpustack_controller import kube as kube_module
from gpustack_controller.kube import ApiError, Kube, Resource
from gpustack_controller.metrics import REGISTRY, StatusGauges
from gpustack_controller.reconciler import Caches, DeploymentReconciler
from gpustack_controller.recorder import EventRecorder
from gpustack_controller.watches import Informer
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.core.settings import Settings

NOW = "2026-01-02T03:04:05Z"

Key = tuple[str, str, str]  # (kind, namespace, name)


def _matches(obj: dict[str, Any], selector: str | None) -> bool:
    if not selector:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in selector.split(","):
        name, _, value = term.partition("=")
        if labels.get(name) != value:
            return False
    return True


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)
    return target


@dataclass
class MemoryKube:
    """Objects by (kind, namespace, name); cluster-scoped ones have namespace ``""``."""

    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    #: (verb, kind) -> the error the next such calls raise.
    failures: dict[tuple[str, str], ApiError] = field(default_factory=dict)
    #: The calls made: (``get``, kind), (``list``, kind, label selector), (``apply``, kind,
    #: subresource).
    calls: Counter[tuple[str, ...]] = field(default_factory=Counter)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def fail(self, verb: str, kind: str, error: ApiError | None) -> None:
        if error is None:
            self.failures.pop((verb, kind), None)
        else:
            self.failures[(verb, kind)] = error

    def _check(self, verb: str, resource: Resource) -> None:
        error = self.failures.get((verb, resource.kind))
        if error is not None:
            raise error

    def _key(self, resource: Resource, name: str, namespace: str | None) -> Key:
        return (resource.kind, namespace or "" if resource.namespaced else "", name)

    def _store(self, resource: Resource, obj: dict[str, Any], namespace: str | None) -> Any:
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(next(self._versions))
        if resource.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or ""
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        self.objects[self._key(resource, str(meta["name"]), namespace)] = obj
        return copy.deepcopy(obj)

    def put(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` as a client's create would (generation 1)."""
        resource = _resource_of(obj)
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("generation", 1)
        return cast(dict[str, Any], self._store(resource, obj, obj["metadata"].get("namespace")))

    def stored(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((kind, namespace, name))

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _, _), o in sorted(self.objects.items()) if k == kind]

    # ---- the calls the reconciler makes ------------------------------------------------------

    async def get(
        self, resource: Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        self._check("get", resource)
        self.calls["get", resource.kind] += 1
        obj = self.objects.get(self._key(resource, name, namespace))
        return copy.deepcopy(obj) if obj is not None else None

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[list[dict[str, Any]], str]:
        self._check("list", resource)
        self.calls["list", resource.kind, label_selector or ""] += 1
        items = [
            copy.deepcopy(o)
            for (kind, ns, _), o in sorted(self.objects.items())
            if kind == resource.kind and (not namespace or ns == namespace)
            if _matches(o, label_selector)
        ]
        return items, str(next(self._versions))

    async def create(
        self, resource: Resource, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self._check("create", resource)
        obj = copy.deepcopy(body)
        meta = obj["metadata"]
        if "name" not in meta:
            meta["name"] = f"{meta['generateName']}{next(self._versions)}"
        if self._key(resource, str(meta["name"]), namespace) in self.objects:
            raise ApiError(409, "AlreadyExists", f"{resource.kind} {meta['name']} exists")
        return cast(dict[str, Any], self._store(resource, obj, namespace))

    async def replace(
        self, resource: Resource, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self._check("replace", resource)
        key = self._key(resource, str(body["metadata"]["name"]), namespace)
        stored = self.objects.get(key)
        if stored is None:
            raise ApiError(404, "NotFound")
        version = body["metadata"].get("resourceVersion")
        if version and version != stored["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "the object has been modified")
        obj = copy.deepcopy(body)
        obj["status"] = copy.deepcopy(stored.get("status"))
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            del self.objects[key]
            return obj
        return cast(dict[str, Any], self._store(resource, obj, namespace))

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        """As the client: a failed uid precondition alone reads as gone; with a resourceVersion
        precondition, any failed precondition is a 409."""
        self._check("delete", resource)
        key = self._key(resource, name, namespace)
        stored = self.objects.get(key)
        if stored is None:
            return False
        meta = stored["metadata"]
        if (uid and meta.get("uid") != uid) or (
            resource_version and meta.get("resourceVersion") != resource_version
        ):
            if resource_version:
                raise ApiError(409, "Conflict", "Precondition failed")
            return False
        del self.objects[key]
        return True

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        body: dict[str, Any],
        namespace: str | None = None,
        *,
        subresource: str = "",
    ) -> dict[str, Any]:
        self._check("patch", resource)
        stored = self.objects.get(self._key(resource, name, namespace))
        if stored is None:
            raise ApiError(404, "NotFound")
        patch = copy.deepcopy(body)
        patch.get("metadata", {}).pop("resourceVersion", None)
        return cast(dict[str, Any], self._store(resource, _merge(stored, patch), namespace))

    async def apply(
        self,
        resource: Resource,
        body: dict[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        subresource: str = "",
    ) -> dict[str, Any]:
        self._check("apply", resource)
        self.calls["apply", resource.kind, subresource] += 1
        key = self._key(resource, str(body["metadata"]["name"]), namespace)
        stored = self.objects.get(key)
        if subresource == "status":
            if stored is None:
                raise ApiError(404, "NotFound")
            stored["status"] = copy.deepcopy(body["status"])
            return cast(dict[str, Any], self._store(resource, stored, namespace))
        obj = copy.deepcopy(body)
        if stored is not None and "status" in stored and "status" not in obj:
            # An apply of the main resource leaves the status subresource alone.
            obj["status"] = copy.deepcopy(stored["status"])
        return cast(dict[str, Any], self._store(resource, obj, namespace))


def _resource_of(obj: dict[str, Any]) -> Resource:
    for value in vars(kube_module).values():
        if isinstance(value, Resource) and (value.kind, value.api_version) == (
            obj["kind"],
            obj["apiVersion"],
        ):
            return value
    raise KeyError(f"no Resource for {obj['apiVersion']} {obj['kind']}")


def reconciler(kube: MemoryKube, gauges: StatusGauges) -> DeploymentReconciler:
    """The controller's reconciler over ``kube`` with empty caches (reads go live)."""
    live = cast(Kube, kube)
    m = kube_module
    caches = Caches(
        deployments=Informer(live, m.MODEL_DEPLOYMENTS),
        pods=Informer(live, m.PODS),
        services=Informer(live, m.SERVICES),
        workloads=Informer(live, m.WORKLOADS),
        bindings=Informer(live, m.BINDINGS),
        pools=Informer(live, m.POOLS),
        backends=Informer(live, m.BACKENDS),
        instance_types=Informer(live, m.INSTANCE_TYPES),
    )
    return DeploymentReconciler(
        live,
        caches,
        EventRecorder(live, instance="test"),
        settings=Settings,
        now=lambda: NOW,
        gauges=gauges,
    )


def serve_every_pod(kube: MemoryKube) -> None:
    """What the scheduler, the kubelet and Kueue would do: each replica Pod Ready, with an
    admitted Workload holding quota for it."""
    for pod in kube.of_kind("Pod"):
        pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
        meta = pod["metadata"]
        reserved = [
            {"type": t, "status": "True", "lastTransitionTime": "2026-01-02T03:04:05Z"}
            for t in ("QuotaReserved", "Admitted")
        ]
        kube.put(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": f"pod-{meta['name']}",
                    "namespace": meta["namespace"],
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta["uid"],
                        }
                    ],
                },
                "status": {"conditions": reserved},
            }
        )


EXAMPLE = Path(__file__).parents[2] / "examples" / "cpu-only.yaml"
K = TypeVar("K", bound=MemoryKube)


def example_cluster(name: str, kube: K) -> K:
    """``kube`` holding the CPU example's InstanceType and its deployment, renamed ``name``."""
    for doc in load_documents(EXAMPLE.read_text()):
        if doc["kind"] == "ModelDeployment":
            doc["metadata"]["name"] = name
        kube.put(doc)
    return kube


def run(coro: Awaitable[Any]) -> Any:
    """``coro`` run to its end in a fresh event loop."""

    async def main() -> Any:
        return await coro

    return asyncio.run(main())


def counted(metric: str, **labels: str) -> float:
    """A counter's sample in the controller's registry (0 before its first increment)."""
    return REGISTRY.get_sample_value(metric, labels) or 0.0
