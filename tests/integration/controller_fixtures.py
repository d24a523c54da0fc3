"""Helpers for the controller's integration tests: the controller in-process, reads of what the
real Kueue, scheduler and KWOK did, and bounded waits.

The tests run on the simulated cluster (:mod:`.cluster`): Kueue composes and admits the
Workloads, the scheduler binds, KWOK makes bound Pods Running and Ready. Nothing here writes a
Workload, a Workload condition, Kueue's finalizer or a Pod status. To hold admission a test
sets the ClusterQueue's ``stopPolicy`` (:func:`hold_queue`) or sizes its quota
(:func:`new_entrance`). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    CONFIGMAPS,
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    ApiError,
    Kube,
    Resource,
)
from gpustack_render.core import labels
from gpustack_render.core.settings import Settings, settings_to_data

from .cluster import Cluster, cluster_queue

T = TypeVar("T")
NAMESPACES: Resource = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
ENTRANCE = "gpustack-fnv64-0123456789abcdef"
INSTANCE_TYPE = "gpustack-nvidia-a10g-linux-amd64"
IMAGE = "vllm/vllm-openai:v0.25.1"
WAIT = 30.0


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def eventually(
    probe: Callable[[], Awaitable[T | None]], *, timeout: float = WAIT, what: str = "condition"
) -> T:
    """Poll ``probe`` until it returns something truthy; fail after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: T | None = None
    while True:
        last = await probe()
        if last:
            return last
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}: {last!r}")
        await asyncio.sleep(0.1)


async def steady(
    probe: Callable[[], Awaitable[bool]], *, seconds: float = 3.0, what: str = "steady state"
) -> None:
    """``probe`` stays true for ``seconds`` (something that must *not* happen does not)."""
    deadline = asyncio.get_running_loop().time() + seconds
    while asyncio.get_running_loop().time() < deadline:
        assert await probe(), what
        await asyncio.sleep(0.2)


async def new_namespace(kube: Kube, prefix: str = "ctl") -> str:
    name = unique(prefix)
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def ensure_instance_type(
    kube: Kube, name: str = INSTANCE_TYPE, entrance: str = ENTRANCE
) -> None:
    """An acceleratable InstanceType whose status publishes ``entrance``."""
    body = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
    }
    try:
        await kube.create(INSTANCE_TYPES, body)
    except ApiError as exc:
        if not exc.conflict:
            raise
    await kube.merge_patch(
        INSTANCE_TYPES,
        name,
        {
            "status": {
                "entrance": entrance,
                "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
                "accelerator": {"capacity": 64},
            }
        },
        subresource="status",
    )


def deployment(
    name: str, namespace: str, *roles: dict[str, Any], image: str = IMAGE
) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": image},
            "roles": list(roles)
            or [{"name": "server", "replicas": 2, "instanceType": INSTANCE_TYPE}],
        },
    }


def role(name: str = "server", **fields: Any) -> dict[str, Any]:
    return {"name": name, "instanceType": INSTANCE_TYPE, "resources": {"accelerator": 1}, **fields}


@contextlib.asynccontextmanager
async def running_controller(
    kubeconfig: Path, *, namespace: str = "gpustack-system", **options: Any
) -> AsyncIterator[Controller]:
    """The controller, in this event loop, until the block ends (then stopped, its client
    closed)."""
    kube = await Kube.connect(kubeconfig=str(kubeconfig))
    settings: dict[str, Any] = {"system_namespace": namespace, "leader_election": False}
    controller = Controller(kube, Options(**{**settings, **options}))
    try:
        await controller.start(sync_timeout=30)
        yield controller
    finally:
        await controller.stop()
        await kube.close()


# ---- reads -------------------------------------------------------------------------------


async def pods_of(kube: Kube, namespace: str, md: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(
        PODS, namespace, label_selector=f"{labels.INSTANCE}={md},{labels.NAME}={labels.NAME_VALUE}"
    )
    return items


def seat(pod: dict[str, Any]) -> tuple[str, int, int]:
    lbl = pod["metadata"]["labels"]
    return (lbl[labels.COMPONENT], int(lbl[labels.POD_ORDINAL]), int(lbl[labels.MEMBER_INDEX]))


def seats_of(pods: list[dict[str, Any]]) -> dict[tuple[str, int], str]:
    """(role, ordinal) → Pod uid of the live Pods (one Pod per replica: size 1)."""
    out = {}
    for pod in live(pods):
        role, ordinal, _ = seat(pod)
        out[(role, ordinal)] = str(pod["metadata"]["uid"])
    return out


def live(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


async def get_md(kube: Kube, namespace: str, name: str) -> dict[str, Any] | None:
    return await kube.get(MODEL_DEPLOYMENTS, name, namespace)


def condition(md: dict[str, Any], type_: str) -> dict[str, Any] | None:
    for cond in (md.get("status") or {}).get("conditions") or ():
        if cond.get("type") == type_:
            return dict(cond)
    return None


def replacing(md: dict[str, Any], role_name: str = "server") -> int | None:
    for r in (md.get("status") or {}).get("roles") or ():
        if r.get("name") == role_name:
            value = r.get("replacing")
            return int(value) if value is not None else None
    return None


# ---- Kueue, as the real one reports it ----------------------------------------------------


#: Kueue's kinds as the tests read them: the storage version.
KUEUE_WORKLOADS: Resource = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CLUSTER_QUEUES: Resource = Resource(
    "kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False
)
#: Kueue's finalizer on the Pods of a group it manages.
KUEUE_POD_FINALIZER = "kueue.x-k8s.io/managed"


def has_condition(obj: dict[str, Any], type_: str, status: str = "True") -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == status
        for c in (obj.get("status") or {}).get("conditions") or ()
    )


def admitted(workload: dict[str, Any]) -> bool:
    """Admitted now: ``Admitted=True``, not being evicted, not being deleted."""
    return (
        has_condition(workload, "Admitted")
        and not has_condition(workload, "Evicted")
        and not workload["metadata"].get("deletionTimestamp")
    )


async def workloads_in(kube: Kube, namespace: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(KUEUE_WORKLOADS, namespace)
    return items


def group_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"][labels.POD_GROUP_NAME])


async def workload_of(kube: Kube, pod: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload Kueue made for the Pod's group (named after the group)."""
    namespace = pod["metadata"]["namespace"]
    return await kube.get(KUEUE_WORKLOADS, group_of(pod), namespace)


def running_ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    conditions = status.get("conditions") or ()
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
    )


async def serving(kube: Kube, namespace: str, md: str, pods: int) -> list[dict[str, Any]] | None:
    """Exactly ``pods`` live Pods, each Running and Ready, each group admitted by Kueue."""
    current = live(await pods_of(kube, namespace, md))
    if len(current) != pods or not all(running_ready(p) for p in current):
        return None
    workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, namespace)}
    if not all(group_of(p) in workloads and admitted(workloads[group_of(p)]) for p in current):
        return None
    return current


@dataclass(frozen=True)
class Entrance:
    """A private InstanceType with its own entrance and ClusterQueue, so a test owns its quota."""

    instance_type: str
    name: str

    def role(self, name: str = "server", **fields: Any) -> dict[str, Any]:
        return {**role(name, **fields), "instanceType": self.instance_type}


async def new_entrance(kube: Kube, cluster: Cluster, *, gpus: int = 64, **queue: Any) -> Entrance:
    """An InstanceType publishing a fresh entrance, and that entrance's ClusterQueue holding
    ``gpus`` ``nvidia.com/gpu`` (every other covered resource as the template has it)."""
    suffix = uuid.uuid4().hex[:16]
    entrance = Entrance(f"gpustack-nvidia-a10g-{suffix[:6]}", f"gpustack-fnv64-{suffix}")
    await ensure_instance_type(kube, entrance.instance_type, entrance.name)
    cluster.ensure_cluster_queue(entrance.name, quota={"nvidia.com/gpu": gpus}, **queue)
    return entrance


def hold_queue(cluster: Cluster, name: str, hold: bool = True) -> None:
    """Stop (``stopPolicy: Hold``) or resume admission on a ClusterQueue: Kueue's own switch."""
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"stopPolicy": "Hold" if hold else "None"},
        },
        manager="gpustack-test-hold",
    )


def gpu_usage(cluster: Cluster, name: str) -> int:
    """``nvidia.com/gpu`` the ClusterQueue has admitted now (its ``flavorsUsage``)."""
    _, cq = cluster.control_plane.request(
        "GET", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{name}"
    )
    total = 0
    for flavor in (cq.get("status") or {}).get("flavorsUsage") or ():
        for resource in flavor.get("resources") or ():
            if resource.get("name") == "nvidia.com/gpu":
                total += int(str(resource.get("total", "0")))
    return total


# ---- teardown, waited for -----------------------------------------------------------------


async def deployment_gone(kube: Kube, namespace: str, name: str) -> bool:
    """The deployment and its Pods are gone, and no Workload is left in the namespace (each
    test has its own)."""
    if await get_md(kube, namespace, name) is not None:
        return False
    if await pods_of(kube, namespace, name):
        return False
    return not await workloads_in(kube, namespace)


async def tear_down(kube: Kube, namespace: str, *names: str, timeout: float = 60.0) -> None:
    """Delete each deployment and wait until it is gone with its Pods and the namespace's
    Workloads (a controller must be running), so no test leaves quota or Node capacity
    behind."""
    for name in names:
        await kube.delete(MODEL_DEPLOYMENTS, name, namespace)
    for name in names:

        async def gone(name: str = name) -> bool:
            return await deployment_gone(kube, namespace, name)

        await eventually(
            gone,
            timeout=timeout,
            what=f"{namespace}/{name} torn down",
        )


@dataclass(frozen=True)
class NodeDeliverySetup:
    """What a Node-delivery cluster test starts from: an entrance on a flavor the scheduler
    places for, a system namespace holding Settings with Node delivery from the test hub, and
    the test's own namespace."""

    entrance: Entrance
    system: str
    namespace: str


async def node_delivery_setup(
    kube: Kube, cluster: Cluster, *, hub_url: str, tag: str, worker_label: str = "true"
) -> NodeDeliverySetup:
    """A fresh :class:`NodeDeliverySetup`. Its ResourceFlavor has no topology, so Kueue admits
    by quota and kube-scheduler places the Pods (on a topology-aware flavor Kueue picks the node
    and honours only required node affinity: docs/decisions.md, "The node preference and
    Kueue's topology-aware placement"). ``worker_label``: the ``gpustack.ai/worker`` value its
    flavor selects (``true``: the shared simulated nodes)."""
    suffix = uuid.uuid4().hex[:8]
    flavor = f"plain-{tag}-{suffix}"
    cluster.apply(
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {"nodeLabels": {"gpustack.ai/worker": worker_label}},
        }
    )
    entrance = Entrance(
        f"gpustack-nvidia-{tag}-{suffix[:6]}", f"gpustack-fnv64-{suffix}{uuid.uuid4().hex[:8]}"
    )
    await ensure_instance_type(kube, entrance.instance_type, entrance.name)
    cluster.apply(cluster_queue(entrance.name, flavor=flavor))
    system = await new_namespace(kube, f"{tag}-sys")
    namespace = await new_namespace(kube, tag)
    settings = Settings(
        system_namespace=system, huggingface_endpoint=hub_url, artifact_delivery_mode="Node"
    )
    await kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "gpustack-settings"},
            "data": settings_to_data(settings),
        },
        system,
    )
    return NodeDeliverySetup(entrance, system, namespace)
