"""The owner index: which ModelDeployment each watched Pod belongs to, and which Pods own each
Kueue Workload, kept up to date from the watch events (docs/contract/controller.md §2, §9).

A Workload names its Pods (owner references), never the deployment; the deployment is found
through the Pods it controls. Each Pod or Workload event updates its own entries, and the
questions the controller asks — the deployments a Workload belongs to, the Workloads of a set of
deployments — are answered from reverse maps in time proportional to the answer, never by a
walk over every Pod or Workload.

A deleted Pod's deployment is remembered while a Workload still names the Pod as its owner:
Kueue deletes a group's Workload after its Pods are gone, and that last event must still reach
the deployment (its create gate waits for the group's name to be free). It is forgotten with
the last Workload naming it.

Deployments are work-queue keys ``<namespace>/<name>``; Workloads are ``<namespace>/<name>``
keys too. Nothing here performs I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpustack_render.api.modeldeployment import KIND
from gpustack_render.core import jsonview, ownerrefs
from gpustack_render.reconcile.edges import Edges


def controlling_deployment_key(obj: Mapping[str, Any]) -> str | None:
    """The work-queue key of the ModelDeployment controlling ``obj`` (an owned Pod or Service,
    in the object's namespace), or ``None`` when no ModelDeployment controls it."""
    ref = ownerrefs.controller_of(obj, kind=KIND)
    if ref is None:
        return None
    namespace = jsonview.view(obj.get("metadata")).get("namespace") or ""
    return f"{namespace}/{ref.get('name')}"


class OwnerIndex:
    """Pod uid → its deployment and Workload → its owner Pod uids, both readable backwards."""

    def __init__(self) -> None:
        self._pods: Edges[str, str] = Edges()
        self._workloads: Edges[str, str] = Edges()
        #: Deleted Pods a Workload still names → their deployment.
        self._gone: Edges[str, str] = Edges()

    def pod_changed(self, uid: str, deployment: str | None) -> None:
        """The Pod ``uid`` is controlled by ``deployment`` (``None``: by no deployment)."""
        if uid:
            self._gone.set(uid, ())
            self._pods.set(uid, () if deployment is None else (deployment,))

    def pod_deleted(self, uid: str) -> None:
        """The Pod ``uid`` is gone (its deployment is remembered while a Workload names it)."""
        if not uid:
            return
        deployments = self._pods.targets(uid)
        self.pod_changed(uid, None)
        if self._workloads.keys_to(uid):
            self._gone.set(uid, deployments)

    def workload_changed(self, key: str, owner_pods: Iterable[str]) -> None:
        """The Workload ``key`` is owned by the Pods ``owner_pods`` (uids)."""
        before = self._workloads.targets(key)
        self._workloads.set(key, owner_pods)
        for uid in before:
            if not self._workloads.keys_to(uid):
                self._gone.set(uid, ())  # no Workload names the deleted Pod any more

    def workload_deleted(self, key: str) -> None:
        """The Workload ``key`` is gone."""
        self.workload_changed(key, ())

    def deployments_owning(
        self, owner_pods: Iterable[str], *, deleted_too: bool = False
    ) -> set[str]:
        """The deployments controlling any of the Pods ``owner_pods`` (a Workload's owners);
        with ``deleted_too``, also those of deleted Pods a Workload still names (where a
        Workload's own events go)."""
        found = {d for uid in owner_pods for d in self._pods.targets(uid)}
        if deleted_too:
            found |= {d for uid in owner_pods for d in self._gone.targets(uid)}
        return found

    def workloads_of(self, deployments: Iterable[str]) -> set[str]:
        """The keys of the Workloads owning a Pod of one of ``deployments``."""
        return {
            key
            for deployment in deployments
            for uid in self._pods.keys_to(deployment)
            for key in self._workloads.keys_to(uid)
        }

    def size(self) -> int:
        """Entries held: zero once every Pod and Workload seen is deleted."""
        return len(self._pods) + len(self._workloads) + len(self._gone)
