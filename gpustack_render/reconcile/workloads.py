"""Which Kueue Workloads are a deployment's: the one rule the controller's pass, the joint
admission check and ``explain``'s live reader all use (docs/contract/controller.md §6).

A Workload of the deployment's namespace is the deployment's when it owns one of the
deployment's Pods, or is named after one of its replicas' Kueue groups (a group's Workload
outlives its Pods: a replica whose Pods are gone still holds its quota until the Workload goes;
:meth:`~gpustack_render.reconcile.observed.ObservedWorkload.of_deployment`). The groups are those
of every replica the deployment runs *now*: each role's count as the stored status says
(``status.roles[].desired``, which follows an autoscaler above ``roles[].replicas``), else
``roles[].replicas`` (:func:`deployment_groups`). A shell finds the candidates (from its cache's
index by owner Pod and by name, or a list of the namespace) and keeps the ones
:func:`deployment_workloads` keeps.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from typing import Any

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import jsonview, naming
from gpustack_render.reconcile.observed import observe_workload
from gpustack_render.reconcile.scaling import running_counts


def deployment_groups(
    md: ModelDeployment, counts: Mapping[str, int] | None = None
) -> frozenset[str]:
    """The Kueue group name of every replica ``md`` runs: ordinals ``0 .. count-1`` of each role,
    ``counts`` giving each role's count (default: :func:`running_counts`, the status's
    ``desired`` else ``roles[].replicas``)."""
    running = running_counts(md) if counts is None else counts
    namespace, name = md.metadata.namespace, md.metadata.name
    return frozenset(
        naming.group_name(namespace, name, role.name, ordinal)
        for role in md.spec.roles
        for ordinal in range(running.get(role.name, role.replicas))
    )


def deployment_workloads(
    candidates: Iterable[Mapping[str, Any]],
    *,
    namespace: str,
    pod_uids: Set[str],
    groups: Set[str],
) -> list[Mapping[str, Any]]:
    """The candidates (raw Workloads, any namespace, duplicates allowed) that are the
    deployment's, once each, in name order as a list of the namespace gives them. A candidate
    naming no namespace counts as in ``namespace`` (an item of that namespace's list)."""
    found: dict[str, Mapping[str, Any]] = {}
    for raw in candidates:
        meta = jsonview.view(raw.get("metadata"))
        name = str(meta.get("name") or "")
        if meta.get("namespace") not in (None, "", namespace) or name in found:
            continue
        if observe_workload(raw).of_deployment(pod_uids=pod_uids, groups=groups):
            found[name] = raw
    return [found[n] for n in sorted(found)]
