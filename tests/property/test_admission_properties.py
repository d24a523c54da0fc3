"""Properties of the ModelDeployment admission over generated deployments.

- ``review_deployment`` never raises, whatever the request (arbitrary JSON, a valid deployment
  with one field replaced by junk, any operation, any lookup failing);
- every cause's field path exists in the request (as submitted, or after schema defaults and
  the mutation the API server applies before validation), or is the parent of one that does
  not (a Required field);
- every deployment the valid-deployment strategies generate is admitted, deterministically —
  this file's own and the renderer's shared ``strategies.cases`` (the same deployments render);
- defaulting is a fixed point: the admitted object, stored, is admitted again with no patch;
- a failed read of any looked-up object never turns a valid deployment into a refusal: the
  verdict is allowed, or an internal error whose every cause names an object whose read failed
  and that the deployment reads; a failed read of an object it does not read changes nothing.

The valid-deployment strategy lives here; it builds deployments that satisfy every rule by
construction (unique short names, one arrangement of kinds, degrees within the card count,
no owned keys or reserved ports).
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render.admission import review_deployment
from gpustack_render.api.inputs import (
    InputObject,
    InstanceType,
    KVCacheBackend,
    KVCachePool,
    KVCachePoolBinding,
)
from gpustack_render.core.errors import Verdict, VerdictKind
from gpustack_render.core.paths import FieldPath
from gpustack_render.core.review import AdmissionRequest, Operation
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.defaulting import default_accelerators
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

from .strategies import ROUTER_IMAGES, Case, cases

NS = "team-a"
GPU, CPU = "gpu-8x", "cpu-only"
CARDS = 8

# --- looked-up objects ------------------------------------------------------------------------


def _objects() -> list[InputObject]:
    return [
        InstanceType.model_validate(
            {
                "metadata": {"name": GPU},
                "spec": {"acceleratable": True},
                "status": {
                    "entrance": "gpustack-fnv64-0123456789abcdef",
                    "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
                    "accelerator": {"capacity": CARDS},
                },
            }
        ),
        InstanceType.model_validate({"metadata": {"name": CPU}, "spec": {"acceleratable": False}}),
        KVCachePoolBinding.model_validate(
            {
                "metadata": {"name": "dram", "namespace": NS},
                "spec": {
                    "poolRef": {"name": "pool"},
                    "domain": {"blockSize": 16, "dtype": "bfloat16"},
                },
            }
        ),
        KVCachePool.model_validate(
            {
                "metadata": {"name": "pool"},
                "spec": {"backends": ["backend"]},
                "status": {"clientEndpoint": "master:50051"},
            }
        ),
        KVCacheBackend.model_validate(
            {"metadata": {"name": "backend"}, "spec": {"transport": {"protocol": "Auto"}}}
        ),
    ]


OBJECTS = _objects()
FAULTS = [
    ("InstanceType", "", GPU),
    ("InstanceType", "", CPU),
    ("KVCachePoolBinding", NS, "dram"),
    ("KVCachePool", "", "pool"),
    ("KVCacheBackend", "", "backend"),
]


def _lookups(failing: set[tuple[str, str, str]] | None = None) -> StaticLookups:
    found = StaticLookups.of(OBJECTS)
    found.failing = set(failing or ())
    return found


# --- strategies -------------------------------------------------------------------------------

names = st.from_regex(r"[a-z][a-z0-9]{0,7}", fullmatch=True)
safe_args = st.sampled_from(
    [
        ["--max-model-len", "4096"],
        ["--enable-prefix-caching"],
        ["--gpu-memory-utilization=0.9"],
        ["--trust-remote-code"],
        ["--kv-cache-dtype-skip-layers", "0"],
    ]
)
SAFE_ENV = (
    {"name": "HF_HOME", "value": "/models"},
    {"name": "MC_TE_METRIC", "value": "0"},
    {"name": "NCCL_DEBUG", "value": "INFO"},
)
safe_env = st.lists(st.sampled_from(range(len(SAFE_ENV))), max_size=3, unique=True).map(
    lambda picks: [dict(SAFE_ENV[i]) for i in picks]
)


@st.composite
def role_bodies(draw: st.DrawFn, *, engine: str, routed: bool, cached: bool) -> dict[str, Any]:
    """One valid role without name or kind."""
    body: dict[str, Any] = {
        "replicas": draw(st.integers(1, 3)),
        "size": draw(st.integers(1, 3)),
    }
    gpu = draw(st.booleans())
    body["instanceType"] = GPU if gpu else CPU
    cards = 0
    if gpu:
        cards = draw(st.integers(1, CARDS))
        if draw(st.booleans()):
            body["resources"] = {"accelerator": draw(st.sampled_from([cards, str(cards)]))}
        else:
            cards = 1  # the mutating default
    args: list[str] = []
    for extra in draw(st.lists(safe_args, max_size=2)):
        args.extend(extra)
    if cards:
        tp = draw(st.sampled_from([d for d in range(1, cards + 1) if cards % d == 0]))
        flag = "--tensor-parallel-size" if engine == "vLLM" else "--tp-size"
        args.extend([flag, str(tp)])
    if args:
        body["extraArgs"] = args
    if draw(st.booleans()):
        body["env"] = draw(safe_env)
    if not routed and draw(st.booleans()):
        body["ports"] = [{"port": draw(st.integers(9000, 9100))}]
    if draw(st.booleans()):
        body["topology"] = {"requiredLevel": "topology.kubernetes.io/zone"}
    if draw(st.booleans()):
        body["additionalVolumes"] = [{"mountPath": "/models", "secret": {"name": "weights"}}]
    if not routed and not cached and draw(st.integers(0, 4)) == 0:
        body["command"] = ["vllm", "serve", "m"] if engine == "vLLM" else ["python3", "-m", "x"]
    return body


@st.composite
def valid_deployments(draw: st.DrawFn) -> dict[str, Any]:
    engine = draw(st.sampled_from(["vLLM", "SGLang"]))
    routed = draw(st.booleans())
    cached = draw(st.booleans())
    pair = draw(st.booleans())
    if pair:
        kinds: list[str | None] = ["Prefill", "Decode"]
    else:
        kinds = [draw(st.sampled_from(["Server", None]))] * draw(st.integers(1, 4))
    role_names = draw(st.lists(names, min_size=len(kinds), max_size=len(kinds), unique=True))
    roles = []
    for name, kind in zip(role_names, kinds, strict=True):
        body = draw(role_bodies(engine=engine, routed=routed, cached=cached))
        body["name"] = name
        if kind is not None:
            body["kind"] = kind
        roles.append(body)
    spec: dict[str, Any] = {
        "model": {"name": draw(st.sampled_from(["Qwen/Qwen3-8B", "m"]))},
        "engine": {"name": engine, "image": "runner:1"},
        "roles": roles,
    }
    if routed:
        spec["router"] = {"name": "llm-d-router", "image": ROUTER_IMAGES["llm-d-router"]}
    if cached:
        spec["kvCache"] = {"poolRef": {"name": "dram"}}
    if draw(st.booleans()):
        spec["kvTransfer"] = {"protocol": draw(st.sampled_from(["TCP", "RDMA", "Auto"]))}
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": draw(names), "namespace": NS},
        "spec": spec,
    }


json_scalars = st.none() | st.booleans() | st.integers(-3, 70000) | st.text(max_size=8)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
operations = st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT"])


@st.composite
def damaged_deployments(draw: st.DrawFn) -> dict[str, Any]:
    """A valid deployment with one value somewhere replaced by arbitrary JSON or a risky one."""
    obj = draw(valid_deployments())
    paths: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key in node:
                paths.append((node, key))
                walk(node[key])
        elif isinstance(node, list):
            for i in range(len(node)):
                paths.append((node, i))
                walk(node[i])

    walk(obj)
    parent, key = draw(st.sampled_from(paths))
    risky = st.sampled_from(
        [
            "--kv-transfer-config",
            "--kv_events_config.x=1",
            "-tp",
            "-t2",
            "MOONCAKE_TENANT_ID",
            "kubernetes.io/hostname",
            "Encode",
            5557,
            8998,
            "x" * 70,
            "1.5",
            -1,
            0,
            "",
        ]
    )
    parent[key] = draw(risky | json_values)
    return obj


def _review(
    obj: Any,
    *,
    operation: str = "CREATE",
    old: Any = None,
    failing: set[tuple[str, str, str]] | None = None,
    options: Settings | None = None,
) -> Verdict:
    request = AdmissionRequest(
        operation=operation,  # type: ignore[arg-type]
        object=obj if isinstance(obj, dict) else None,
        old_object=old if isinstance(old, dict) else None,
        namespace=NS,
        name="",
    )
    return review_deployment(request, lookups=_lookups(failing), settings=options or Settings())


ROOT = FieldPath()


def _rendered_paths(data: Any, here: FieldPath = ROOT, out: set[str] | None = None) -> set[str]:
    """Every node of ``data`` as Kubernetes renders its field path."""
    out = set() if out is None else out
    out.add(str(here))
    if isinstance(data, dict):
        for key, value in data.items():
            _rendered_paths(value, here.child(str(key)), out)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            _rendered_paths(value, here.index(i), out)
    return out


def _views(obj: dict[str, Any]) -> list[Any]:
    """The request as submitted, and after schema defaults and the mutation."""
    views: list[Any] = [obj]
    md, _ = decode_deployment(obj)
    if md is not None:
        mutated, _ = default_accelerators(md.to_dict(), lookups=_lookups())
        views.append(mutated)
    return views


def _path_exists_or_parent(views: list[Any], field: str) -> bool:
    """``field`` names a node of the request, or a missing member of one that exists."""
    known: set[str] = set()
    for view in views:
        _rendered_paths(view, out=known)
    cut = max(field.rfind("."), field.rfind("["))
    return field in known or (cut > 0 and field[:cut] in known) or (cut < 0 and "" in known)


COMMON = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@COMMON
@given(obj=json_values, old=json_values, operation=operations)
def test_never_raises_on_arbitrary_json(obj: Any, old: Any, operation: Operation) -> None:
    verdict = _review(obj, operation=operation, old=old)
    assert isinstance(verdict, Verdict)


@COMMON
@given(
    obj=damaged_deployments(),
    failing=st.sets(st.sampled_from(FAULTS), max_size=2),
    operation=st.sampled_from(["CREATE", "UPDATE"]),
    old=st.none() | valid_deployments(),
)
def test_damaged_deployments_never_raise_and_paths_exist(
    obj: dict[str, Any],
    failing: set[tuple[str, str, str]],
    operation: str,
    old: dict[str, Any] | None,
) -> None:
    before = copy.deepcopy(obj)
    verdict = _review(obj, operation=operation, old=old, failing=failing)
    assert obj == before, "the request is never modified"
    views = _views(obj)
    for error in verdict.errors:
        assert _path_exists_or_parent(views, error.field), (error.field, error.origin)
        assert error.origin, error


@COMMON
@given(obj=valid_deployments())
def test_valid_deployments_are_admitted(obj: dict[str, Any]) -> None:
    verdict = _review(obj)
    assert verdict.allowed, [e.message() for e in verdict.errors]
    assert _review(obj).summary() == verdict.summary()


@COMMON
@given(obj=valid_deployments())
def test_defaulting_is_a_fixed_point(obj: dict[str, Any]) -> None:
    verdict = _review(obj)
    assert verdict.allowed
    md, _ = decode_deployment(obj)
    assert md is not None
    stored = jsonpatch.apply_patch(md.to_dict(), verdict.patch)
    again = _review(stored, operation="UPDATE", old=stored)
    assert again.allowed, [e.message() for e in again.errors]
    assert again.patch == []
    once, _ = default_accelerators(stored, lookups=_lookups())
    assert once == stored


def _reads(obj: dict[str, Any]) -> set[tuple[str, str, str]]:
    """The looked-up objects (of :data:`FAULTS`) a deployment names: its roles' InstanceTypes and,
    with ``spec.kvCache``, the Binding, its pool and the pool's backend."""
    spec = obj["spec"]
    out = {("InstanceType", "", str(r["instanceType"])) for r in spec["roles"]}
    if spec.get("kvCache"):
        out |= {
            ("KVCachePoolBinding", NS, "dram"),
            ("KVCachePool", "", "pool"),
            ("KVCacheBackend", "", "backend"),
        }
    return out


@COMMON
@given(obj=valid_deployments(), failing=st.sets(st.sampled_from(FAULTS), min_size=1))
def test_failed_reads_never_refuse_a_valid_deployment(
    obj: dict[str, Any], failing: set[tuple[str, str, str]]
) -> None:
    verdict = _review(obj, failing=failing)
    relevant = failing & _reads(obj)
    if not relevant:
        # Nothing the deployment reads failed: the same answer as with every read working.
        assert verdict.summary() == _review(obj).summary()
        return
    assert verdict.kind in (VerdictKind.ALLOWED, VerdictKind.INTERNAL), [
        e.message() for e in verdict.errors
    ]
    if verdict.kind is VerdictKind.INTERNAL:
        names = {name for _, _, name in relevant}
        for error in verdict.errors:
            assert error.type.value == "InternalError", error.message()
            assert any(repr(n) in error.message() or n in error.message() for n in names), (
                error.message(),
                relevant,
            )


@COMMON
@given(case=cases())
def test_the_renderers_valid_deployments_are_admitted(case: Case) -> None:
    meta = case.deployment.get("metadata") or {}
    request = AdmissionRequest(
        operation="CREATE",
        object=copy.deepcopy(case.deployment),
        namespace=str(meta.get("namespace") or "default"),
        name=str(meta.get("name") or ""),
    )
    verdict = review_deployment(request, lookups=case.lookups(), settings=case.settings)
    assert verdict.allowed, [e.message() for e in verdict.errors]
    md, _ = decode_deployment(case.deployment)
    assert md is not None
    stored = jsonpatch.apply_patch(md.to_dict(), verdict.patch)
    again = review_deployment(
        AdmissionRequest(operation="UPDATE", object=stored, old_object=stored, namespace=NS),
        lookups=case.lookups(),
        settings=case.settings,
    )
    assert again.allowed and again.patch == []
