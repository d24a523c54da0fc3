"""Observed objects as the API server prints them, for the explain tests: the Pods a rendering
would create once they ran, and the Kueue Workloads of their groups."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpustack_render.api import ModelDeployment
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.jointcheck import CHECK_NAME
from gpustack_render.rendering.renderer import Rendering, SeatRendering, render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

NAMESPACE = "team-a"
UID = "5b0c9f1e-2d3a-4c5b-8e7f-0a1b2c3d4e5f"
ENTRANCE = "gpustack-fnv64-0123456789abcdef"
STARTED = "2026-11-30T08:00:00Z"

INSTANCE_TYPE = InstanceType.model_validate(
    {
        "metadata": {"name": "a10g"},
        "spec": {
            "acceleratable": True,
            "unitResources": {"cpu": "8", "ram": "32Gi"},
            "localStorage": "200Gi",
        },
        "status": {
            "entrance": ENTRANCE,
            "detail": {"manufacturer": "nvidia", "memory": "24Gi"},
            "accelerator": {"capacity": 4096},
        },
    }
)


def role_spec(
    name: str = "server", *, replicas: int = 2, size: int = 1, args: Sequence[str] = (), **kw: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "instanceType": "a10g",
        "resources": {"accelerator": 1},
        **kw,
    }
    if size != 1:
        spec["size"] = size
    if args:
        spec["extraArgs"] = list(args)
    return spec


def deployment(
    *roles: dict[str, Any],
    name: str = "qwen-chat",
    annotations: Mapping[str, str] | None = None,
    replacing: Mapping[str, int] | None = None,
) -> ModelDeployment:
    raw: dict[str, Any] = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": UID, "generation": 3},
        "spec": {
            "model": {"name": "Qwen/Qwen2.5-7B-Instruct"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": list(roles) or [role_spec()],
        },
    }
    if annotations:
        raw["metadata"]["annotations"] = dict(annotations)
    if replacing:
        raw["status"] = {"roles": [{"name": r, "replacing": o} for r, o in replacing.items()]}
    md, errs = decode_deployment(raw)
    assert md is not None, errs
    return md


def rendered(md: ModelDeployment) -> Rendering:
    return render(md, lookups=StaticLookups.of([INSTANCE_TYPE]), settings=Settings())


def pd_roles(*, prefill_args: Sequence[str] = (), decode_args: Sequence[str] = ()) -> list[Any]:
    return [
        role_spec("prefill", kind="Prefill", args=prefill_args),
        role_spec("decode", kind="Decode", args=decode_args),
    ]


def pod_object(
    seat: SeatRendering,
    *,
    ready: bool = True,
    gates: Sequence[str] = (),
    phase: str | None = None,
    unschedulable: str = "",
    render_version: str | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The Pod the API server holds for ``seat`` once it was created (and ran, unless gated)."""
    pod = copy.deepcopy(seat.pod)
    meta = pod["metadata"]
    name = seat.name or f"{seat.generate_name}{seat.pod_spec_hash[:5]}"
    meta.pop("generateName", None)
    meta["name"] = name
    meta["uid"] = f"uid-{name}"
    meta["creationTimestamp"] = STARTED
    if render_version is not None:
        meta["annotations"]["modeldeployment.gpustack.ai/render-version"] = render_version
    if gates:
        pod["spec"]["schedulingGates"] = [{"name": g} for g in gates]
    if gates or unschedulable:
        scheduled: dict[str, Any] = {"type": "PodScheduled", "status": "False"}
        if unschedulable:
            scheduled.update(reason="Unschedulable", message=unschedulable)
        elif gates:
            scheduled.update(
                reason="SchedulingGated",
                message="Scheduling is blocked due to non-empty scheduling gates",
            )
        pod["status"] = {"phase": "Pending", "conditions": [scheduled]}
        return pod
    else:
        pod["spec"]["nodeName"] = "gpu-node-1"
    pod["status"] = {
        "phase": phase or "Running",
        "conditions": list(conditions)
        if conditions is not None
        else [
            {"type": "PodScheduled", "status": "True"},
            {"type": "Ready", "status": "True" if ready else "False"},
        ],
        "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0}],
    }
    return pod


def workload_object(
    group: str,
    pods: Iterable[Mapping[str, Any]],
    *,
    admitted: bool = True,
    quota: tuple[str, str] | None = None,
    joint: tuple[str, str] | None = None,
    active: bool = True,
    reserved: bool | None = None,
) -> dict[str, Any]:
    """The Kueue Workload of one group: admitted, or ``quota`` = (reason, message) of a
    ``QuotaReserved=False``; ``joint`` = (state, message) of the joint check's entry."""
    owners = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": p["metadata"]["name"],
            "uid": p["metadata"]["uid"],
        }
        for p in pods
    ]
    conditions: list[dict[str, Any]] = []
    holds = admitted if reserved is None else reserved
    if holds:
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "True",
                "reason": "QuotaReserved",
                "lastTransitionTime": STARTED,
            }
        )
    elif quota is not None:
        conditions.append(
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": quota[0],
                "message": quota[1],
                "lastTransitionTime": STARTED,
            }
        )
    if admitted:
        conditions.append(
            {
                "type": "Admitted",
                "status": "True",
                "reason": "Admitted",
                "lastTransitionTime": STARTED,
            }
        )
    status: dict[str, Any] = {"conditions": conditions}
    if joint is not None:
        status["admissionChecks"] = [
            {
                "name": CHECK_NAME,
                "state": joint[0],
                "message": joint[1],
                "lastTransitionTime": STARTED,
            }
        ]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": group,
            "namespace": NAMESPACE,
            "uid": f"wl-{group}",
            "ownerReferences": owners,
        },
        "spec": {
            "queueName": ENTRANCE,
            "active": active,
            "podSets": [{"name": "main", "count": len(owners)}],
        },
        "status": status,
    }


def replicas_of(
    rendering: Rendering,
    role: str,
    ordinals: Iterable[int] | None = None,
    **pod_kw: Any,
) -> list[dict[str, Any]]:
    """Running, admitted replicas of ``role`` as rendered by ``rendering``: Pods, then one
    Workload per group."""
    r = rendering.role(role)
    assert r is not None
    out: list[dict[str, Any]] = []
    for ordinal in ordinals if ordinals is not None else range(r.replicas):
        pods = [pod_object(s, **pod_kw) for s in r.instance(ordinal)]
        out += [*pods, workload_object(r.instance(ordinal)[0].group_name, pods)]
    return out


def as_list(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """What ``kubectl get … -o yaml`` prints."""
    return {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": {"resourceVersion": ""},
        "items": list(objects),
    }
