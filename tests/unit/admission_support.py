"""Builders shared by the ModelDeployment admission tests: deployments as plain data, the objects
they name, and a one-call review returning (type, field, origin) triples."""

from __future__ import annotations

import copy
from typing import Any

from property.strategies import ROUTER_IMAGE, ROUTER_IMAGES

from gpustack_render.admission import review_deployment
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.schema.lookups import StaticLookups

NAMESPACE = "team-a"
GPU = "gpu-8x"
CPU = "cpu-only"


def role(name: str = "server", **fields: Any) -> dict[str, Any]:
    """A role as plain data; ``instanceType`` defaults to the acceleratable :data:`GPU`."""
    out: dict[str, Any] = {"name": name, "instanceType": GPU}
    out.update(fields)
    return out


def deployment(
    *roles: dict[str, Any], name: str = "qwen", engine: str = "vLLM", **spec: Any
) -> dict[str, Any]:
    """A ModelDeployment as plain data; one default server role when none is given."""
    body: dict[str, Any] = {
        "model": {"name": "Qwen/Qwen3-8B"},
        "engine": {"name": engine, "image": "runner:1"},
        "roles": list(roles) or [role()],
    }
    body.update(spec)
    if isinstance(body.get("router"), dict):
        # A router gets an image of the test's own so messages and objects name it; "image": None
        # leaves it out (the Settings default then applies, or router.image-missing warns).
        router = body["router"] = dict(body["router"])
        router.setdefault("image", ROUTER_IMAGES.get(str(router.get("name")), ROUTER_IMAGE))
        if router["image"] is None:
            del router["image"]
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": body,
    }


def pd(**spec: Any) -> dict[str, Any]:
    """A prefill/decode pair."""
    roles = spec.pop("roles", None) or [
        role("prefill", kind="Prefill"),
        role("decode", kind="Decode"),
    ]
    return deployment(*roles, **spec)


def instance_type(
    name: str = GPU,
    *,
    acceleratable: bool = True,
    manufacturer: str | None = "nvidia",
    capacity: int | None = 8,
    profiles: list[str] | None = None,
    logical: int | None = None,
    group: str | None = None,
) -> InstanceType:
    """An InstanceType; ``profiles``/``logical`` given means its slicing detail is computed."""
    detail: dict[str, Any] = {}
    if manufacturer is not None:
        detail["manufacturer"] = manufacturer
    if profiles is not None or logical is not None:
        sliced: dict[str, Any] = {}
        if profiles is not None:
            sliced["physical"] = {"profiles": [{"name": p, "memoryMiB": 40960} for p in profiles]}
        if logical is not None:
            sliced["logical"] = {"count": logical}
        detail["slicedDetail"] = sliced
    if group is not None:
        detail["acceleratorGroup"] = group
    status: dict[str, Any] = {"entrance": "gpustack-fnv64-0123456789abcdef", "detail": detail}
    if capacity is not None:
        status["accelerator"] = {"capacity": capacity}
    return InstanceType.model_validate(
        {
            "metadata": {"name": name},
            "spec": {"acceleratable": acceleratable, "unitResources": {"cpu": "8", "ram": "32Gi"}},
            "status": status,
        }
    )


def cache_chain(
    *protocols: str, backend_protocol: str = "Auto", binding: str = "team-a-dram"
) -> list[InputObject]:
    """Binding → pool → backend; ``protocols`` are per-member-group overrides ("" = none)."""
    members = [{"transport": {"protocol": p}} if p else {"medium": "DRAM"} for p in protocols]
    backend: dict[str, Any] = {
        "metadata": {"name": "dram-backend"},
        "spec": {"transport": {"protocol": backend_protocol}},
    }
    if members:
        backend["spec"]["connection"] = {"managed": {"members": members}}
    return [
        KVCachePoolBinding.model_validate(
            {
                "metadata": {"name": binding, "namespace": NAMESPACE},
                "spec": {
                    "poolRef": {"name": "dram-pool"},
                    "domain": {"name": "team-a", "blockSize": 16, "dtype": "bfloat16"},
                },
            }
        ),
        KVCachePool.model_validate(
            {
                "metadata": {"name": "dram-pool"},
                "spec": {"backends": ["dram-backend"]},
                "status": {"clientEndpoint": "master:50051"},
            }
        ),
        KVCacheBackend.model_validate(backend),
    ]


def default_objects() -> list[InputObject]:
    return [instance_type(), instance_type(CPU, acceleratable=False, capacity=None)]


def lookups_of(
    objects: list[InputObject] | None = None, *, failing: set[tuple[str, str, str]] | None = None
) -> StaticLookups:
    found = StaticLookups.of(default_objects() if objects is None else objects)
    found.failing = set(failing or ())
    return found


def review(
    obj: dict[str, Any] | None,
    objects: list[InputObject] | None = None,
    *,
    old: dict[str, Any] | None = None,
    operation: str | None = None,
    settings: Settings | None = None,
    failing: set[tuple[str, str, str]] | None = None,
) -> Verdict:
    """Run ``review_deployment`` as the ``admit`` verb would."""
    op = operation or ("UPDATE" if old is not None else "CREATE")
    request = AdmissionRequest(
        operation=op,  # type: ignore[arg-type]
        object=copy.deepcopy(obj) if obj is not None else None,
        old_object=copy.deepcopy(old) if old is not None else None,
        namespace=NAMESPACE,
        name=((obj or old or {}).get("metadata") or {}).get("name", ""),
    )
    return review_deployment(
        request, lookups=lookups_of(objects, failing=failing), settings=settings or Settings()
    )


def causes(verdict: Verdict) -> list[tuple[str, str, str]]:
    """(origin, field, reason) of every cause, in order."""
    return [(e.origin, e.field, e.type.value) for e in verdict.errors]


def stored(obj: dict[str, Any], objects: list[InputObject] | None = None) -> dict[str, Any]:
    """``obj`` as the API server stores it: schema defaults and the mutation applied."""
    import jsonpatch

    from gpustack_render.schema.decoding import decode_deployment

    verdict = review(obj, objects)
    assert verdict.allowed, causes(verdict)
    md, _ = decode_deployment(obj)
    assert md is not None
    out: dict[str, Any] = jsonpatch.apply_patch(md.to_dict(), verdict.patch)
    return out
