"""What a pass observes of one deployment: its Pods, listed live, and its Workloads, from the
Workload cache (docs/contract/controller.md §6).

The Pods are listed from the API server by the deployment's label (uncached: the create gate must
see every Pod that still holds a group name). The Workloads are the library's rule
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
from gpustack_render.core import ownerrefs
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

    def __init__(self, kube: Kube, workloads: Informer) -> None:
        self.kube = kube
        self.workloads = workloads
        workloads.add_indexer(WORKLOADS_BY_POD, owner_pod_uids)

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
        pods = [observe_pod(p, owner_uid=uid) for p in raw_pods]
        uids = {p.uid for p in pods}
        if self.workloads.synced.is_set():
            candidates = indexed_workloads(self.workloads, namespace, uids, groups)
        else:  # no cache to read yet: the namespace's, live
            candidates, _ = await self.kube.list(WORKLOADS, namespace)
        mine = deployment_workloads(candidates, namespace=namespace, pod_uids=uids, groups=groups)
        return pods, [observe_workload(w) for w in mine]
