"""What a pass observes of one deployment: its Pods, from the Pod cache or listed live, and its
Workloads, from the Workload cache (docs/contract/controller.md §6).

A pass first plans on the Pod cache (:meth:`Observer.cached`); a plan that would create, delete,
remember a replacement or hold is planned again on the Pods listed from the API server by the
deployment's label (uncached: the create gate must see every Pod that still holds a group name,
and nothing is deleted on a cache's word). So a pass that only reports, most of them, reads
nothing from the API server. The Workloads are the library's rule
(:mod:`gpustack_render.reconcile.workloads`): the candidates are the cached Workloads owning one
of those Pods (an index by owner Pod uid) and the ones named after the deployment's groups (a
cache only ever lags behind, so a Workload it shows is still held, never freed early); before the
cache has synced, the namespace's Workloads are listed live.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, Final

from gpustack_controller.kube import PODS, WORKLOADS, Kube
from gpustack_controller.watches import Informer
from gpustack_render.api.modeldeployment import KIND, ModelDeployment
from gpustack_render.core import labels, ownerrefs
from gpustack_render.reconcile.jointcheck import owner_pods
from gpustack_render.reconcile.keys import deployment_selector
from gpustack_render.reconcile.observed import (
    ObservedPod,
    ObservedWorkload,
    observe_pod,
    observe_workload,
)
from gpustack_render.reconcile.replicas import ReplicaIndex
from gpustack_render.reconcile.workloads import deployment_workloads

#: The index of the Services' informer by controlling deployment uid, of the Workloads'
#: informer by owner Pod uid, and of the Pods' by ``namespace/instance`` label (added by the
#: reconcilers that read them).
SERVICES_BY_OWNER: Final = "controller-uid"
WORKLOADS_BY_POD: Final = "owner-pod"
PODS_BY_INSTANCE: Final = "instance"


def instance_key(obj: Mapping[str, Any]) -> list[str]:
    """``namespace/instance`` of a Pod carrying the deployment labels (none: not indexed)."""
    meta = obj.get("metadata") or {}
    found = (meta.get("labels") or {}).get(labels.INSTANCE)
    return [f"{meta.get('namespace') or ''}/{found}"] if isinstance(found, str) else []


def controller_uid(obj: Mapping[str, Any]) -> list[str]:
    """The uid of the ModelDeployment controlling ``obj`` (none: not indexed)."""
    ref = ownerrefs.controller_of(obj, kind=KIND)
    return [str(ref["uid"])] if ref is not None and ref.get("uid") else []


def owner_pod_uids(obj: Mapping[str, Any]) -> list[str]:
    """The uids of the Pods owning a Workload."""
    return [str(r["uid"]) for r in owner_pods(obj) if r.get("uid")]


def indexed_workloads(
    cache: Informer, namespace: str, pod_uids: Set[str], groups: Set[str]
) -> list[dict[str, Any]]:
    """The cached candidates: Workloads owning one of ``pod_uids``, and the ones named after
    ``groups`` in ``namespace``."""
    found = [raw for uid in pod_uids for raw in cache.by_index(WORKLOADS_BY_POD, uid)]
    for group in groups:
        named = cache.get(f"{namespace}/{group}")
        if named is not None:
            found.append(named)
    return found


class Observer:
    """Reads a deployment's Pods and Workloads for a pass."""

    def __init__(self, kube: Kube, workloads: Informer, pods: Informer | None = None) -> None:
        self.kube = kube
        self.workloads = workloads
        workloads.add_indexer(WORKLOADS_BY_POD, owner_pod_uids)
        self.pods = pods
        if pods is not None:
            pods.add_indexer(PODS_BY_INSTANCE, instance_key)

    def cached(
        self, namespace: str, name: str, uid: str, groups: frozenset[str] = frozenset()
    ) -> tuple[list[ObservedPod], list[ObservedWorkload]] | None:
        """The deployment's Pods and Workloads as the caches hold them; ``None`` while either
        cache is not following its stream (then only a live list will do). The Pod cache is
        selected by the name label; the instance label picks the deployment's, as the live
        list's selector does."""
        pods = self.pods
        if pods is None or not (pods.current and self.workloads.current):
            return None
        raw = sorted(
            pods.by_index(PODS_BY_INSTANCE, f"{namespace}/{name}"),
            key=lambda p: str((p.get("metadata") or {}).get("name") or ""),
        )  # in name order, as a live list gives them
        return self._observed(namespace, uid, groups, raw)

    async def index(
        self, md: ModelDeployment, groups: frozenset[str] = frozenset()
    ) -> ReplicaIndex:
        """Every Pod of the deployment and its Workloads, indexed once for the pass."""
        meta = md.metadata
        return await self.index_named(meta.namespace, meta.name, meta.uid, groups)

    async def index_named(
        self, namespace: str, name: str, uid: str, groups: frozenset[str] = frozenset()
    ) -> ReplicaIndex:
        return ReplicaIndex.of(*await self.observed(namespace, name, uid, groups))

    async def observed(
        self,
        namespace: str,
        name: str,
        uid: str,
        groups: frozenset[str] = frozenset(),
        *,
        raw_pods: list[dict[str, Any]] | None = None,
    ) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
        """The deployment's Pods (listed live, by label, unless the pass listed them already:
        ``raw_pods``) and its Workloads (by the library's rule), Workloads in name order as a
        list of the namespace would give them."""
        if raw_pods is None:
            raw_pods, _ = await self.kube.list(
                PODS, namespace, label_selector=deployment_selector(name)
            )
        if not self.workloads.synced.is_set():  # no cache to read yet: the namespace's, live
            candidates, _ = await self.kube.list(WORKLOADS, namespace)
            return self._observed(namespace, uid, groups, raw_pods, candidates)
        return self._observed(namespace, uid, groups, raw_pods)

    def _observed(
        self,
        namespace: str,
        uid: str,
        groups: frozenset[str],
        raw_pods: list[dict[str, Any]],
        candidates: list[dict[str, Any]] | None = None,
    ) -> tuple[list[ObservedPod], list[ObservedWorkload]]:
        pods = [observe_pod(p, owner_uid=uid) for p in raw_pods]
        uids = {p.uid for p in pods}
        if candidates is None:
            candidates = indexed_workloads(self.workloads, namespace, uids, groups)
        mine = deployment_workloads(candidates, namespace=namespace, pod_uids=uids, groups=groups)
        return pods, [observe_workload(w) for w in mine]
