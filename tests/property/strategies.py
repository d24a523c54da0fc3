"""Shared builders and Hypothesis strategies for VALID ModelDeployments and the objects they name.

Import from any test (``tests/`` is on ``sys.path`` under pytest)::

    from property.strategies import Case, cases, deployment, instance_type, render_case

A :class:`Case` is one deployment (plain JSON, as a user writes it) plus every object it looks up
(InstanceTypes, and with a pool its Binding, pool and backend), and optionally Settings.

**Valid** means the admission webhook accepts the deployment (docs/contract/admission.md §2–§15):
names keep every ``<md>-<role>`` a DNS-1035 label and every member name a DNS-1123 label; kinds are
either one or more ``Server`` roles or exactly one ``Prefill`` and one ``Decode``; a router fronts
the engine (``llm-d-router`` either, ``vllm-router`` vLLM, ``sglang-gateway`` SGLang); routed
roles all serve plain TCP on the same port; no owned flag or env appears in ``extraArgs``/``env``;
no reserved port is declared; declared degrees parse and fit the card count; whole-card requests
stay within the type's capacity; no explicit ``accelerator: 0``; backends offer one protocol;
manufacturers are ``nvidia`` or ``amd`` (vLLM-Ascend needs a CANN pool and is covered by golden
files instead); no ``resources.interface`` (its rules depend on the transport, covered by golden
files). Every case also renders without error.

The plain builders (:func:`instance_type`, :func:`binding`, :func:`pool`, :func:`backend`,
:func:`deployment`, :func:`role`) are handy in table-driven unit tests too.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from gpustack_render.api.inputs import InputObject
from gpustack_render.core.settings import Settings
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.kinds import MODELS as KIND_MODELS
from gpustack_render.schema.lookups import StaticLookups

API_VERSION = "worker.gpustack.ai/v1"
NAMESPACE = "team-a"

# --- plain builders ---------------------------------------------------------------------------


def instance_type(
    name: str = "gpu-a",
    *,
    manufacturer: str | None = "nvidia",
    acceleratable: bool = True,
    cpu: str = "16",
    ram: str = "64Gi",
    ephemeral_storage: str | None = None,
    local_storage: str | None = None,
    entrance: str | None = "gpustack-fnv64-00000000000000a1",
    capacity: int | None = 64,
    memory: str | None = "80Gi",
    logical_count: int | None = None,
    profiles: Sequence[dict[str, Any]] | None = None,
    accelerator_group: str | None = None,
) -> dict[str, Any]:
    """An InstanceType; a non-acceleratable one reports no accelerator detail."""
    unit: dict[str, Any] = {"cpu": cpu, "ram": ram}
    if ephemeral_storage is not None:
        unit["ephemeralStorage"] = ephemeral_storage
    spec: dict[str, Any] = {"acceleratable": acceleratable, "unitResources": unit}
    if local_storage is not None:
        spec["localStorage"] = local_storage
    status: dict[str, Any] = {}
    if entrance is not None:
        status["entrance"] = entrance
    if acceleratable:
        detail: dict[str, Any] = {}
        if manufacturer is not None:
            detail["manufacturer"] = manufacturer
        if memory is not None:
            detail["memory"] = memory
        sliced: dict[str, Any] = {}
        if logical_count is not None:
            sliced["logical"] = {"count": logical_count}
        if profiles is not None:
            sliced["physical"] = {"profiles": [dict(p) for p in profiles]}
        if sliced:
            detail["slicedDetail"] = sliced
        if accelerator_group is not None:
            detail["acceleratorGroup"] = accelerator_group
        status["detail"] = detail
        if capacity is not None:
            status["accelerator"] = {"capacity": capacity}
    return {
        "apiVersion": API_VERSION,
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": spec,
        "status": status,
    }


def binding(
    name: str = "team-a-cache",
    *,
    namespace: str = NAMESPACE,
    pool_name: str = "dram-pool",
    domain: str | None = "team-a-shared",
    block_size: int = 16,
    dtype: str = "bfloat16",
    phase: str | None = "Ready",
    quota_granted: str | None = "True",
) -> dict[str, Any]:
    """A KVCachePoolBinding, Registered by default (Ready with QuotaGranted=True)."""
    dom: dict[str, Any] = {"blockSize": block_size, "dtype": dtype}
    if domain is not None:
        dom["name"] = domain
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if quota_granted is not None:
        status["conditions"] = [{"type": "QuotaGranted", "status": quota_granted}]
    return {
        "apiVersion": API_VERSION,
        "kind": "KVCachePoolBinding",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"poolRef": {"name": pool_name}, "domain": dom},
        "status": status,
    }


def pool(
    name: str = "dram-pool",
    *,
    backend_name: str = "dram-backend",
    endpoint: str | None = "dram-pool-master.gpustack-system.svc:50051",
    ledger: tuple[str, str] | None = ("True", ""),
) -> dict[str, Any]:
    """A KVCachePool; ``ledger`` is the (status, reason) of ``QuotaLedgerAvailable``."""
    status: dict[str, Any] = {}
    if endpoint is not None:
        status["clientEndpoint"] = endpoint
    if ledger is not None:
        cond: dict[str, Any] = {"type": "QuotaLedgerAvailable", "status": ledger[0]}
        if ledger[1]:
            cond["reason"] = ledger[1]
        status["conditions"] = [cond]
    return {
        "apiVersion": API_VERSION,
        "kind": "KVCachePool",
        "metadata": {"name": name},
        "spec": {"backends": [backend_name]},
        "status": status,
    }


def backend(
    name: str = "dram-backend",
    *,
    protocol: str | None = "Auto",
    groups: Sequence[str | None] | None = None,
) -> dict[str, Any]:
    """A KVCacheBackend; ``groups`` gives managed member groups and their protocol overrides."""
    spec: dict[str, Any] = {}
    if protocol is not None:
        spec["transport"] = {"protocol": protocol}
    managed: dict[str, Any] = {"leader": {"multiTenancy": True}}
    if groups is not None:
        managed["members"] = [
            {"transport": {"protocol": g}} if g is not None else {"medium": "DRAM"} for g in groups
        ]
    spec["connection"] = {"managed": managed}
    return {
        "apiVersion": API_VERSION,
        "kind": "KVCacheBackend",
        "metadata": {"name": name},
        "spec": spec,
    }


def role(
    name: str = "server", *, instance_type_name: str = "gpu-a", **fields: Any
) -> dict[str, Any]:
    """One role; keyword arguments are API fields in JSON spelling (``extraArgs=[...]``)."""
    return {"name": name, "instanceType": instance_type_name, **fields}


#: The image each router runs in tests (the Settings give no default image; D26).
ROUTER_IMAGES: dict[str, str] = {
    "llm-d-router": "registry.example.com/llm-d-router:v0.10.0",
    "vllm-router": "registry.example.com/vllm-router:0.1.17",
    "sglang-gateway": "registry.example.com/sglang-router:0.3.2",
}
ROUTER_IMAGE = "registry.example.com/router:test"


def deployment(
    roles: Sequence[dict[str, Any]] | None = None,
    *,
    name: str = "qwen",
    namespace: str | None = NAMESPACE,
    engine: str = "vLLM",
    image: str = "vllm/vllm-openai:v0.25.1",
    model: str = "Qwen/Qwen3-8B",
    pool_ref: str | None = None,
    router: str | dict[str, Any] | None = None,
    transfer: str | None = None,
    uid: str | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A ModelDeployment as a user writes it (schema defaults not yet applied)."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    if uid is not None:
        meta["uid"] = uid
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: dict[str, Any] = {
        "model": {"name": model},
        "engine": {"name": engine, "image": image},
    }
    if pool_ref is not None:
        spec["kvCache"] = {"poolRef": {"name": pool_ref}}
    if router is not None:
        block = {"name": router} if isinstance(router, str) else dict(router)
        # A router needs an image (router.image-missing): tests give one unless they say
        # otherwise ("image": None leaves it out).
        block.setdefault("image", ROUTER_IMAGES.get(str(block.get("name")), ROUTER_IMAGE))
        if block["image"] is None:
            del block["image"]
        spec["router"] = block
    if transfer is not None:
        spec["kvTransfer"] = {"protocol": transfer}
    spec["roles"] = [copy.deepcopy(r) for r in (roles if roles is not None else [role()])]
    return {"apiVersion": API_VERSION, "kind": "ModelDeployment", "metadata": meta, "spec": spec}


@dataclass
class Case:
    """One deployment and everything it looks up."""

    deployment: dict[str, Any]
    inputs: list[dict[str, Any]] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)

    def lookups(self) -> StaticLookups:
        ns = self.deployment.get("metadata", {}).get("namespace") or "default"
        return StaticLookups.of(input_objects(self.inputs), default_namespace=ns)

    def copy(self) -> Case:
        return Case(copy.deepcopy(self.deployment), copy.deepcopy(self.inputs), self.settings)


def input_objects(inputs: Sequence[dict[str, Any]]) -> list[InputObject]:
    """Decode plain input objects into the API models (raises on a malformed one)."""
    out: list[InputObject] = []
    for data in inputs:
        model, errs = decode_model(KIND_MODELS[data["kind"]], data)
        if model is None or not isinstance(model, InputObject):
            raise ValueError(f"bad input {data.get('kind')}: {[e.message() for e in errs]}")
        out.append(model)
    return out


def render_case(case: Case) -> Any:
    """Decode and render ``case``; returns the
    :class:`gpustack_render.rendering.renderer.Rendering`."""
    from gpustack_render.rendering.renderer import render

    md, errs = decode_deployment(case.deployment)
    if md is None:
        raise ValueError([e.message() for e in errs])
    return render(md, lookups=case.lookups(), settings=case.settings)


def pool_inputs(
    *,
    protocol: str = "Auto",
    ledger: tuple[str, str] | None = ("True", ""),
    dtype: str = "bfloat16",
) -> list[dict[str, Any]]:
    """A registered Binding ``team-a-cache`` on a pool with one backend of ``protocol``."""
    return [binding(dtype=dtype), pool(ledger=ledger), backend(protocol=protocol)]


# --- Hypothesis strategies --------------------------------------------------------------------

DEPLOYMENT_NAMES = ("qwen", "chat", "md-a", "llama3", "embed-svc")
SERVER_ROLE_NAMES = ("server", "chat", "embed", "gen", "worker-a")
IMAGES = ("vllm/vllm-openai:v0.25.1", "lmsysorg/sglang:v0.5.18", "registry.example.com/vllm:1")
MODELS = ("Qwen/Qwen3-8B", "meta-llama/Llama-3.1-8B-Instruct", "BAAI/bge-small-en-v1.5")
SAFE_ENV = ("HF_HUB_OFFLINE", "NCCL_DEBUG", "TOKENIZERS_PARALLELISM", "VLLM_LOGGING_LEVEL")
TOPOLOGY_LEVELS = ("topology.gpustack.ai/rack", "topology.kubernetes.io/zone")


@st.composite
def instance_types(draw: st.DrawFn, name: str) -> dict[str, Any]:
    """An acceleratable nvidia/amd type or a CPU-only type, ready (entrance, detail)."""
    accel = draw(st.booleans() | st.just(True))
    entrance = f"gpustack-fnv64-{draw(st.integers(0, 2**64 - 1)):016x}"
    cpu = draw(st.sampled_from(("4", "8", "16", "2500m")))
    ram = draw(st.sampled_from(("16Gi", "32Gi", "64Gi", "96Gi")))
    local = draw(st.none() | st.sampled_from(("8Gi", "100Gi", "2Ti")))
    eph = draw(st.none() | st.sampled_from(("10Gi", "40Gi")))
    if not accel:
        return instance_type(
            name,
            acceleratable=False,
            cpu=cpu,
            ram=ram,
            entrance=entrance,
            local_storage=local,
            ephemeral_storage=eph,
        )
    return instance_type(
        name,
        manufacturer=draw(st.sampled_from(("nvidia", "amd"))),
        cpu=cpu,
        ram=ram,
        entrance=entrance,
        local_storage=local,
        ephemeral_storage=eph,
        capacity=draw(st.integers(8, 64)),
    )


@st.composite
def _role(  # noqa: C901 (a data generator: one draw per optional field)
    draw: st.DrawFn,
    *,
    name: str,
    kind: str | None,
    it: dict[str, Any],
    engine: str,
    serving_port: int | None,
    routed: bool,
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if kind is not None:
        fields["kind"] = kind
    fields["replicas"] = draw(st.integers(1, 4))
    fields["size"] = draw(st.integers(1, 3))
    cards = 1  # the effective count: unset defaults to 1 on an acceleratable type
    if it["spec"]["acceleratable"] and draw(st.booleans()):
        cards = draw(st.sampled_from((1, 2, 4, 8)))
        fields["resources"] = {"accelerator": cards}
    if serving_port is not None:
        fields["ports"] = [{"port": serving_port, "protocol": "TCP"}]
    takeover = draw(st.integers(0, 9)) == 0
    args: list[str] = []
    if draw(st.booleans()):
        tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if d <= cards]))
        flag = "--tensor-parallel-size" if engine == "vLLM" else "--tp-size"
        args += [flag, str(tp)]
    if draw(st.booleans()):
        args += ["--max-model-len", str(draw(st.sampled_from((2048, 8192, 32768))))]
    if takeover:
        base = (
            ["vllm", "serve", "m"]
            if engine == "vLLM"
            else ["python3", "-m", "sglang.launch_server", "--model-path", "m"]
        )
        port = serving_port if serving_port is not None else 8000
        fields["command"] = [*base, *args, "--port", str(port)]
        if draw(st.booleans()):
            fields["extraArgs"] = ["--inert-beside-a-command"]
    elif args:
        fields["extraArgs"] = args
    env = draw(st.lists(st.sampled_from(SAFE_ENV), unique=True, max_size=2))
    if env:
        fields["env"] = [{"name": n, "value": "1"} for n in env]
    if draw(st.booleans()):
        fields["shmSize"] = draw(st.sampled_from(("4Gi", "32Gi", "1Gi")))
    if draw(st.integers(0, 3)) == 0:
        fields["topology"] = {"requiredLevel": draw(st.sampled_from(TOPOLOGY_LEVELS))}
    if draw(st.integers(0, 3)) == 0:
        fields["startupTimeoutSeconds"] = draw(st.integers(10, 86400))
    if draw(st.integers(0, 3)) == 0:
        fields["terminationGracePeriodSeconds"] = draw(st.integers(15, 3600))
    if draw(st.integers(0, 4)) == 0:
        fields["image"] = draw(st.sampled_from(IMAGES))
    if draw(st.integers(0, 4)) == 0:
        fields["additionalVolumes"] = [
            {"mountPath": "/models", "readOnly": True, "configMap": {"name": "models"}}
        ]
    if draw(st.integers(0, 5)) == 0 and not routed:
        fields["privileged"] = True
    return role(name, instance_type_name=it["metadata"]["name"], **fields)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A valid deployment with its inputs (see the module docstring for what "valid" covers)."""
    engine = draw(st.sampled_from(("vLLM", "SGLang")))
    pair = draw(st.booleans())
    router: str | None = None
    if draw(st.booleans()):
        router = draw(
            st.sampled_from(
                ("llm-d-router", "vllm-router")
                if engine == "vLLM"
                else ("llm-d-router", "sglang-gateway")
            )
        )
    with_pool = draw(st.booleans())
    types = [draw(instance_types("gpu-a")), draw(instance_types("gpu-b"))]
    serving_port = draw(st.none() | st.sampled_from((8000, 9000, 8080)))
    roles: list[dict[str, Any]] = []
    specs: list[tuple[str, str | None]]
    if pair:
        specs = [("prefill", "Prefill"), ("decode", "Decode")]
    else:
        names = draw(
            st.lists(st.sampled_from(SERVER_ROLE_NAMES), min_size=1, max_size=3, unique=True)
        )
        specs = [(n, draw(st.sampled_from(("Server", None)))) for n in names]
    for name, kind in specs:
        it = draw(st.sampled_from(types))
        roles.append(
            draw(
                _role(
                    name=name,
                    kind=kind,
                    it=it,
                    engine=engine,
                    serving_port=serving_port
                    if router is not None
                    else draw(st.none() | st.sampled_from((8000, 9000))),
                    routed=router is not None,
                )
            )
        )
    md = deployment(
        roles,
        name=draw(st.sampled_from(DEPLOYMENT_NAMES)),
        engine=engine,
        image=draw(st.sampled_from(IMAGES)),
        model=draw(st.sampled_from(MODELS)),
        pool_ref="team-a-cache" if with_pool else None,
        router=router,
        transfer=draw(st.none() | st.sampled_from(("TCP", "RDMA", "Auto"))),
        uid=draw(st.none() | st.just("6b1f0c1e-1d2e-4f3a-9b8c-7d6e5f4a3b2c")),
    )
    inputs = [t for t in types if any(r["instanceType"] == t["metadata"]["name"] for r in roles)]
    if with_pool:
        inputs += pool_inputs(protocol=draw(st.sampled_from(("Auto", "TCP", "RDMA"))))
    return Case(md, inputs)
