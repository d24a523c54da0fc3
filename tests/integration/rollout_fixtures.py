"""Helpers for the rollout and departure tests on the simulated cluster: edits, a timeline of
what the API server held (sampled while a rollout runs), Kueue's view of a replica, the eviction
API, a plain-Pod group that preempts, and a controller whose process can be "killed" between
two writes of one pass.

Nothing here writes a Workload, a Workload condition, Kueue's finalizer or a Pod status: the
tests observe what the real Kueue, scheduler and KWOK do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import MODEL_DEPLOYMENTS, PODS, Kube, Resource
from gpustack_render.core import labels

from .cluster import Cluster
from .controller_fixtures import (
    KUEUE_WORKLOADS,
    admitted,
    eventually,
    get_md,
    gpu_usage,
    group_of,
    live,
    pods_of,
    replacing,
    seat,
    serving,
    workloads_in,
)

NEW_IMAGE = "vllm/vllm-openai:v0.26.0"
NEWER_IMAGE = "vllm/vllm-openai:v0.27.0"
#: Every wait on the slow shared machine.
LONG = 60.0


def image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][-1]["image"])


def uid(obj: dict[str, Any] | None) -> str | None:
    return None if obj is None else str(obj["metadata"]["uid"])


def by_ordinal(
    pods: Iterable[dict[str, Any]], role_name: str = "server"
) -> dict[int, dict[str, Any]]:
    """Member 0 of each live replica of ``role_name``, by ordinal."""
    out: dict[int, dict[str, Any]] = {}
    for pod in live(list(pods)):
        role, ordinal, member = seat(pod)
        if role == role_name and member == 0:
            out[ordinal] = pod
    return out


def members(
    pods: Iterable[dict[str, Any]], ordinal: int, role_name: str = "server"
) -> list[dict[str, Any]]:
    """Every Pod (terminating ones too) of one replica."""
    return [p for p in pods if seat(p)[0] == role_name and seat(p)[1] == ordinal]


async def edit_role(kube: Kube, ns: str, name: str, **fields: Any) -> None:
    """Merge ``fields`` into the first role of the stored deployment (and ``image``, when given,
    into the engine): one edit, as a user makes it."""
    md = await get_md(kube, ns, name)
    assert md is not None
    spec = md["spec"]
    engine_image = fields.pop("image", None)
    if engine_image is not None:
        spec["engine"]["image"] = engine_image
    spec["roles"][0].update(fields)
    await kube.merge_patch(MODEL_DEPLOYMENTS, name, {"spec": spec}, ns)


def workload_images(workload: dict[str, Any]) -> set[str]:
    """The container images of the Pod template Kueue recorded in the Workload."""
    return {
        str(c.get("image"))
        for ps in (workload.get("spec") or {}).get("podSets") or ()
        for c in ((ps.get("template") or {}).get("spec") or {}).get("containers") or ()
    }


async def usage_is(cluster: Cluster, name: str, gpus: int) -> bool:
    return gpu_usage(cluster, name) == gpus


def resize_queue(cluster: Cluster, name: str, gpus: int) -> None:
    """Give the ClusterQueue ``name`` ``gpus`` ``nvidia.com/gpu`` of quota (the administrator's
    way of adding capacity)."""
    cluster.ensure_cluster_queue(name, quota={"nvidia.com/gpu": gpus})


async def md_replacing(kube: Kube, ns: str, name: str) -> int | None:
    md = await get_md(kube, ns, name)
    return None if md is None else replacing(md)


# ---- a timeline of what the API server held --------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """One look at the deployment's Pods (every one, terminating too), then its namespace's
    Workloads (by name = group name) and the remembered replacement."""

    pods: list[dict[str, Any]]
    workloads: dict[str, dict[str, Any]]
    replacing: int | None

    def replica(self, ordinal: int, role_name: str = "server") -> list[dict[str, Any]]:
        return members(self.pods, ordinal, role_name)


@dataclass
class Timeline:
    """Samples taken every ``interval`` seconds while the block runs (see :func:`recording`)."""

    samples: list[Sample] = field(default_factory=list)

    def workloads_ever(self) -> dict[str, dict[str, Any]]:
        """Every Workload seen, by uid (its latest sample)."""
        seen: dict[str, dict[str, Any]] = {}
        for sample in self.samples:
            for w in sample.workloads.values():
                seen[str(w["metadata"]["uid"])] = w
        return seen

    def ever_admitted(self) -> dict[str, dict[str, Any]]:
        """Every Workload seen admitted at least once, by uid."""
        out: dict[str, dict[str, Any]] = {}
        for sample in self.samples:
            for w in sample.workloads.values():
                if admitted(w):
                    out[str(w["metadata"]["uid"])] = w
        return out


@contextlib.asynccontextmanager
async def recording(
    kube: Kube, ns: str, md: str, *, interval: float = 0.1
) -> AsyncIterator[Timeline]:
    timeline = Timeline()

    async def sample() -> None:
        while True:
            pods = await pods_of(kube, ns, md)
            workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
            timeline.samples.append(Sample(pods, workloads, await md_replacing(kube, ns, md)))
            await asyncio.sleep(interval)

    task = asyncio.create_task(sample(), name="timeline")
    try:
        yield timeline
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def settled_replica(
    sample: Sample,
    ordinal: int,
    *,
    size: int,
    image_: str,
    workload_uid: str | None = None,
    not_uid: str | None = None,
) -> bool:
    """The replica is whole (``size`` live members, none terminating), every member runs
    ``image_``, and its group's Workload is admitted now (``workload_uid`` when given; never
    ``not_uid``)."""
    pods = sample.replica(ordinal)
    if len(pods) != size or any(p["metadata"].get("deletionTimestamp") for p in pods):
        return False
    if {image(p) for p in pods} != {image_}:
        return False
    workload = sample.workloads.get(group_of(pods[0]))
    if workload is None or not admitted(workload):
        return False
    wuid = str(workload["metadata"]["uid"])
    return (workload_uid is None or wuid == workload_uid) and wuid != not_uid


def mixed_ordinals(sample: Sample, replicas: int) -> list[int]:
    """Ordinals whose Pods (terminating ones included) run more than one image."""
    return [o for o in range(replicas) if len({image(p) for p in sample.replica(o)}) > 1]


# ---- Kueue and the cluster, from outside --------------------------------------------------------


async def evict(kube: Kube, pod: dict[str, Any]) -> None:
    """Evict ``pod`` through the eviction API (what ``kubectl drain`` does)."""
    meta = pod["metadata"]
    await kube.request(
        "POST",
        PODS.path(meta["namespace"], meta["name"]) + "/eviction",
        body={
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        },
    )


def preemptor_pod(ns: str, name: str, *, queue: str, gpus: int = 1) -> dict[str, Any]:
    """A one-Pod group (Kueue's plain-Pod integration) at ``gpustack-high`` priority, queued on
    the LocalQueue ``queue`` (the controller names it after the entrance)."""
    requests = {"cpu": "100m", "memory": "64Mi", "nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                labels.QUEUE_NAME: queue,
                labels.POD_GROUP_NAME: name,
                "kueue.x-k8s.io/priority-class": "gpustack-high",
            },
            "annotations": {labels.POD_GROUP_TOTAL_COUNT: "1"},
        },
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/urgent:1",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
        },
    }


async def workload_named(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return await kube.get(KUEUE_WORKLOADS, name, ns)


# ---- a controller that can die between two writes ------------------------------------------------


class Freezable:
    """Wraps a client's ``delete``: once :meth:`freeze` is called, every Pod deletion hangs
    until the controller is stopped, like a process killed after its status write and before
    its deletes landed."""

    def __init__(self, kube: Kube) -> None:
        self._delete = kube.delete
        self.frozen = False
        self.blocked = asyncio.Event()
        kube.delete = self.delete  # type: ignore[method-assign]

    def freeze(self) -> None:
        self.frozen = True

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
    ) -> bool:
        if self.frozen and resource == PODS:
            self.blocked.set()
            await asyncio.Event().wait()  # never: the "process" dies here
        return await self._delete(
            resource, name, namespace, uid=uid, resource_version=resource_version
        )


@contextlib.asynccontextmanager
async def freezable_controller(kubeconfig: Path) -> AsyncIterator[Freezable]:
    """The controller with a :class:`Freezable` client; stopping it cancels whatever hangs."""
    kube = await Kube.connect(kubeconfig=str(kubeconfig))
    freezable = Freezable(kube)
    controller = Controller(
        kube, Options(system_namespace="gpustack-system", leader_election=False)
    )
    try:
        await controller.start(sync_timeout=30)
        yield freezable
    finally:
        await controller.stop()
        await kube.close()


async def deploy_serving(kube: Kube, body: dict[str, Any], pods: int) -> list[dict[str, Any]]:
    """Create the deployment and wait until ``pods`` Pods serve, each group admitted."""
    meta = body["metadata"]
    await kube.create(MODEL_DEPLOYMENTS, body, meta["namespace"])
    return await eventually(
        lambda: serving(kube, meta["namespace"], meta["name"], pods),
        timeout=LONG,
        what=f"{pods} admitted, Ready Pods of {meta['name']}",
    )
