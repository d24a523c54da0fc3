"""The owner index: which ModelDeployment each watched Pod belongs to, and which Pods own each
Kueue Workload, kept up to date from the watch events (docs/contract/controller.md §2, §9).

A Workload names its Pods (owner references), never the deployment; the deployment is found
through the Pods it controls. Each Pod or Workload event updates its own entries, and the
questions the controller asks — the deployments a Workload belongs to, the Workloads of a set of
deployments — are answered from reverse maps in time proportional to the answer, never by a
walk over every Pod or Workload.

Deployments are work-queue keys ``<namespace>/<name>``; Workloads are ``<namespace>/<name>``
keys too. Nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

from gpustack_render.api.modeldeployment import KIND
from gpustack_render.core import jsonview, ownerrefs
from gpustack_render.reconcile.multimap import MultiMap


def controlling_deployment_key(obj: Mapping[str, Any]) -> str | None:
    """The work-queue key of the ModelDeployment controlling ``obj`` (an owned Pod or Service,
    in the object's namespace), or ``None`` when no ModelDeployment controls it."""
    ref = ownerrefs.controller_of(obj, kind=KIND)
    if ref is None:
        return None
    namespace = jsonview.view(obj.get("metadata")).get("namespace") or ""
    return f"{namespace}/{ref.get('name')}"


class OwnerIndex:
    """Pod uid → deployment, Workload → owner Pod uids, and the reverse of both."""

    def __init__(self) -> None:
        self._pod_owner: dict[str, str] = {}
        self._deployment_pods: MultiMap[str, str] = MultiMap()
        self._workload_pods: dict[str, frozenset[str]] = {}
        self._pod_workloads: MultiMap[str, str] = MultiMap()

    def pod_changed(self, uid: str, deployment: str | None) -> None:
        """The Pod ``uid`` is controlled by ``deployment`` (``None``: by no deployment)."""
        if not uid:
            return
        before = self._pod_owner.get(uid)
        if before == deployment:
            return
        if before is not None:
            self._deployment_pods.discard(before, uid)
        if deployment is None:
            self._pod_owner.pop(uid, None)
        else:
            self._pod_owner[uid] = deployment
            self._deployment_pods.add(deployment, uid)

    def pod_deleted(self, uid: str) -> None:
        """The Pod ``uid`` is gone."""
        self.pod_changed(uid, None)

    def workload_changed(self, key: str, owner_pods: Set[str]) -> None:
        """The Workload ``key`` is owned by the Pods ``owner_pods`` (uids)."""
        for uid in self._workload_pods.pop(key, frozenset()):
            self._pod_workloads.discard(uid, key)
        if owner_pods:
            self._workload_pods[key] = frozenset(owner_pods)
            for uid in owner_pods:
                self._pod_workloads.add(uid, key)

    def workload_deleted(self, key: str) -> None:
        """The Workload ``key`` is gone."""
        self.workload_changed(key, frozenset())

    def deployments_owning(self, owner_pods: Iterable[str]) -> set[str]:
        """The deployments controlling any of the Pods ``owner_pods`` (a Workload's owners)."""
        return {self._pod_owner[uid] for uid in owner_pods if uid in self._pod_owner}

    def workloads_of(self, deployments: Iterable[str]) -> set[str]:
        """The keys of the Workloads owning a Pod of one of ``deployments``."""
        out: set[str] = set()
        for deployment in deployments:
            for uid in self._deployment_pods.get(deployment):
                out |= self._pod_workloads.get(uid)
        return out

    def size(self) -> int:
        """Entries held over every map: zero once every Pod and Workload seen is deleted."""
        maps = (self._pod_owner, self._deployment_pods, self._workload_pods, self._pod_workloads)
        return sum(len(m) for m in maps)
