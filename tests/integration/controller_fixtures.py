"""Helpers for the controller's integration tests: the controller in-process, a test that plays
Kueue and the kubelet, and bounded waits.

There is no Kueue controller and no kubelet on the test API server, so :class:`PlayKueue` does
their part, on demand or in the background: it composes one Workload per complete Pod group
(owned by the group's Pods through plain owner references, named after the group, as Kueue
does for plain Pod groups), marks a group's Pods with Kueue's finalizer, admits Workloads
(``QuotaReserved``/``Admitted`` conditions and a PodSet assignment), plays the kubelet by
making admitted Pods Running and Ready, and releases the finalizer of a Pod whose Workload is
gone. Every wait in these tests is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from gpustack_controller.controller import Controller, Options
from gpustack_controller.kube import (
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    WORKLOADS,
    WORKLOADS_STORAGE,
    ApiError,
    Kube,
    Resource,
)
from gpustack_render.core import labels

T = TypeVar("T")
NAMESPACES: Resource = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
KUEUE_FINALIZER = "kueue.x-k8s.io/managed"
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


# ---- playing Kueue and the kubelet ---------------------------------------------------------


class PlayKueue:
    """Kueue's and the kubelet's part for one namespace."""

    def __init__(
        self, kube: Kube, namespace: str, *, auto_admit: bool = True, finalizers: bool = True
    ) -> None:
        self.kube = kube
        self.namespace = namespace
        self.auto_admit = auto_admit
        self.finalizers = finalizers
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> PlayKueue:
        self._task = asyncio.create_task(self._loop())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _loop(self) -> None:
        while True:
            with contextlib.suppress(ApiError):  # races with the controller: try again
                await self.step()
            await asyncio.sleep(0.2)

    async def workloads(self) -> list[dict[str, Any]]:
        items, _ = await self.kube.list(WORKLOADS, self.namespace)
        return items

    async def step(self) -> None:
        pods, _ = await self.kube.list(PODS, self.namespace)
        workloads = {w["metadata"]["name"]: w for w in await self.workloads()}
        owned_by = {
            ref["uid"]: w
            for w in workloads.values()
            for ref in w["metadata"].get("ownerReferences") or ()
        }
        # A Pod whose Workload is gone loses Kueue's finalizer (then it can go).
        for pod in pods:
            meta = pod["metadata"]
            held = KUEUE_FINALIZER in (meta.get("finalizers") or ())
            if held and meta["uid"] not in owned_by and meta.get("deletionTimestamp"):
                await self._drop_finalizer(pod)
        groups: dict[str, list[dict[str, Any]]] = {}
        for pod in pods:
            meta = pod["metadata"]
            group = (meta.get("labels") or {}).get(labels.POD_GROUP_NAME)
            if group and not meta.get("deletionTimestamp"):
                groups.setdefault(group, []).append(pod)
        for group, members in groups.items():
            total = int(members[0]["metadata"]["annotations"][labels.POD_GROUP_TOTAL_COUNT])
            if group in workloads or len(members) != total:
                continue
            if any(m["metadata"]["uid"] in owned_by for m in members):
                continue
            await self._compose(group, members)
        if self.auto_admit:
            for w in await self.workloads():
                if not _true(w, "Admitted"):
                    await self.admit(w["metadata"]["name"])
        await self.kubelet()

    async def _drop_finalizer(self, pod: dict[str, Any]) -> None:
        finalizers = [f for f in pod["metadata"].get("finalizers") or () if f != KUEUE_FINALIZER]
        await self.kube.merge_patch(
            PODS,
            pod["metadata"]["name"],
            {
                "metadata": {
                    "finalizers": finalizers,
                    "resourceVersion": pod["metadata"]["resourceVersion"],
                }
            },
            self.namespace,
        )

    async def _compose(self, group: str, members: list[dict[str, Any]]) -> None:
        first = members[0]["metadata"]
        role_name = first["annotations"][labels.ROLE_HASH]
        body = {
            "apiVersion": WORKLOADS.api_version,
            "kind": "Workload",
            "metadata": {
                "name": group,
                "namespace": self.namespace,
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": m["metadata"]["name"],
                        "uid": m["metadata"]["uid"],
                    }
                    for m in members
                ],
            },
            "spec": {
                "queueName": first["labels"][labels.QUEUE_NAME],
                "podSets": [
                    {
                        "name": role_name,
                        "count": len(members),
                        "template": {"spec": {"containers": [{"name": "main", "image": "x"}]}},
                    }
                ],
            },
        }
        await self.kube.create(WORKLOADS, body, self.namespace)
        if self.finalizers:
            for m in members:
                finalizers = [*(m["metadata"].get("finalizers") or ()), KUEUE_FINALIZER]
                await self.kube.merge_patch(
                    PODS,
                    m["metadata"]["name"],
                    {"metadata": {"finalizers": finalizers}},
                    self.namespace,
                )

    async def admit(self, name: str, *, flavor: str = "default-flavor") -> None:
        """Reserve quota and admit the Workload ``name``."""
        w = await self.kube.get(WORKLOADS, name, self.namespace)
        if w is None:
            return
        pod_set = w["spec"]["podSets"][0]
        t = now()
        await self.kube.apply(
            WORKLOADS_STORAGE,
            {
                "apiVersion": WORKLOADS_STORAGE.api_version,
                "kind": "Workload",
                "metadata": {"name": name, "namespace": self.namespace},
                "status": {
                    "admission": {
                        "clusterQueue": w["spec"]["queueName"],
                        "podSetAssignments": [
                            {
                                "name": pod_set["name"],
                                "flavors": {"nvidia.com/gpu": flavor},
                                "count": pod_set["count"],
                            }
                        ],
                    },
                    "conditions": [
                        {
                            "type": "QuotaReserved",
                            "status": "True",
                            "reason": "QuotaReserved",
                            "message": "test",
                            "lastTransitionTime": t,
                        },
                        {
                            "type": "Admitted",
                            "status": "True",
                            "reason": "Admitted",
                            "message": "test",
                            "lastTransitionTime": t,
                        },
                    ],
                },
            },
            field_manager="play-kueue",
            namespace=self.namespace,
            subresource="status",
        )

    async def reserve(self, name: str, *, check_state: str | None = None) -> None:
        """Reserve quota only (``QuotaReserved=True``), optionally adding a check entry."""
        w = await self.kube.get(WORKLOADS, name, self.namespace)
        assert w is not None
        pod_set = w["spec"]["podSets"][0]
        status: dict[str, Any] = {
            "admission": {
                "clusterQueue": w["spec"]["queueName"],
                "podSetAssignments": [
                    {
                        "name": pod_set["name"],
                        "flavors": {"nvidia.com/gpu": "default-flavor"},
                        "count": pod_set["count"],
                    }
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "test",
                    "lastTransitionTime": now(),
                },
            ],
        }
        if check_state is not None:
            status["admissionChecks"] = [
                {
                    "name": "gpustack-model-deployment-joint",
                    "state": check_state,
                    "lastTransitionTime": now(),
                    "message": "",
                }
            ]
        await self.kube.apply(
            WORKLOADS_STORAGE,
            {
                "apiVersion": WORKLOADS_STORAGE.api_version,
                "kind": "Workload",
                "metadata": {"name": name, "namespace": self.namespace},
                "status": status,
            },
            field_manager="play-kueue",
            namespace=self.namespace,
            subresource="status",
        )

    async def kubelet(self) -> None:
        """Admitted Pods run and turn Ready."""
        pods, _ = await self.kube.list(PODS, self.namespace)
        admitted = {
            ref["uid"]
            for w in await self.workloads()
            if _true(w, "Admitted")
            for ref in w["metadata"].get("ownerReferences") or ()
        }
        for pod in pods:
            meta = pod["metadata"]
            if meta["uid"] not in admitted or meta.get("deletionTimestamp"):
                continue
            if (pod.get("status") or {}).get("phase") == "Running":
                continue
            await self.kube.merge_patch(
                PODS,
                meta["name"],
                {
                    "status": {
                        "phase": "Running",
                        "conditions": [{"type": "Ready", "status": "True"}],
                    }
                },
                self.namespace,
                subresource="status",
            )


def _true(obj: dict[str, Any], type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or ()
    )
