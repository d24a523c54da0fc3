"""Properties of the KV-cache Pod injection, over generated Pods and looked-up objects.

- injection never raises, whatever the Pod (arbitrary JSON included);
- a refused Pod is returned unchanged, and the input is never modified;
- an admitted Pod differs from the input only in the target container's ``args``, ``env`` and
  ``volumeMounts``, the Pod's ``volumes`` and the two written annotations;
- the verdict's JSON Patch turns the submitted Pod into exactly the injected one, and the
  pruned diff behind it is exact on any copy-on-write edit of a JSON document;
- the same input gives the same output.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.review import AdmissionRequest, Operation
from gpustack_render.core.settings import Settings
from gpustack_render.injection import inject_pod, parse_record, review_pod
from gpustack_render.injection.patch import make_patch as pruned_patch
from gpustack_render.schema.lookups import StaticLookups

P = "kvcache.gpustack.ai/"
NS = "team-a"
WRITTEN = (P + "client-config", P + "injected")

# --- strategies -------------------------------------------------------------------------------

json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=6)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)

TOKENS = [
    "vllm", "/usr/bin/vllm", "serve", "python3", "-m", "sglang.launch_server", "python",
    "env", "-S", "-u", "X", "FOO=1", "--split-string=a b", "tini", "--", "dumb-init", "-r",
    "busybox", "toybox", "timeout", "10", "-k5", "sh", "bash", "-c", "-lc", "-o", "run.sh",
    "./start.sh", "entrypoint", "gosu", "", "-", "--kv-transfer-config", "--kv_transfer_config.x=1",
    "--kv-cache-dtype", "--kv-cache", "fp8", "--hicache-storage-backend", "file",
    "--hicache-storage-backend-extra-config", "--enable-hierarchical-cache", "--model", "m",
]  # fmt: skip
ENV_NAMES = [
    "MOONCAKE_CONFIG_PATH", "MOONCAKE_MASTER", "MOONCAKE_TENANT_ID", "MOONCAKE_DEVICE",
    "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "MC_TE_METRIC", "MC_STORE_CLIENT_METRIC_BANDWIDTH",
    "HOME", "A",
]  # fmt: skip

env_entries = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(ENV_NAMES)},
        optional={
            "value": st.text(max_size=4),
            "valueFrom": st.just({"fieldRef": {"fieldPath": "metadata.name"}}),
        },
    ),
    max_size=5,
)
mounts = st.lists(
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(["gpustack-kvcache-config", "w", "cfg"]),
            "mountPath": st.sampled_from(["/etc/gpustack/kvcache", "/etc/gpustack/kvcache/", "/w"]),
        }
    ),
    max_size=2,
)
containers = st.fixed_dictionaries(
    {"name": st.sampled_from(["server", "proxy", "main"])},
    optional={
        "image": st.just("engine:1"),
        "command": st.lists(st.sampled_from(TOKENS), max_size=5),
        "args": st.lists(st.sampled_from(TOKENS), max_size=6),
        "env": env_entries,
        "volumeMounts": mounts,
        "resources": st.just({"limits": {"cpu": "1"}}),
    },
)
volumes = st.lists(
    st.fixed_dictionaries(
        {"name": st.sampled_from(["gpustack-kvcache-config", "w"]), "emptyDir": st.just({})}
    ),
    max_size=2,
)
ANNOTATION_VALUES = {
    P + "binding": st.sampled_from(["chat", "", "team-b/chat", "missing"]),
    P + "engine": st.sampled_from(["vLLM", "SGLang", "vllm", "vllm-ascend"]),
    P + "manufacturer": st.sampled_from(["ascend", "Ascend"]),
    P + "role": st.sampled_from(["Prefill", "Decode", "", "Server"]),
    P + "container": st.sampled_from(["server", "proxy", "setup", ""]),
    P + "launch-args-forwarded": st.sampled_from(["true", "yes"]),
    P + "domain": st.just("x"),
    P + "injected": st.just("{}"),
    P + "typo": st.just("x"),
    "other.io/keep": st.just("x"),
}


BENIGN = {
    P + "role": st.sampled_from(["Prefill", "Decode", ""]),
    P + "launch-args-forwarded": st.just("true"),
    "other.io/keep": st.just("x"),
}
SAFE_ARGS = ["serve", "--model", "m", "--port", "8000", "--enable-hierarchical-cache", "fp8"]
LAUNCH = {
    "vLLM": [["vllm"], ["tini", "--", "vllm"], ["env", "A=1", "vllm"], ["timeout", "1h", "vllm"]],
    "SGLang": [
        ["python3", "-m", "sglang.launch_server"],
        ["dumb-init", "python3", "-um", "sglang.launch_server"],
    ],
}
mostly = st.sampled_from([True, True, True, False])


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    """Opted-in Pods, most of them injectable, the rest wrong in one or a few ways."""
    engine = draw(st.sampled_from(["vLLM", "SGLang"]))
    notes: dict[str, Any] = {P + "binding": "chat", P + "engine": engine}
    extras = BENIGN if draw(mostly) else ANNOTATION_VALUES
    for key in draw(st.sets(st.sampled_from(sorted(extras)), max_size=2)):
        notes[key] = draw(extras[key])
    if draw(mostly):
        main: dict[str, Any] = {"name": "server", "image": "engine:1"}
        main["command"] = draw(st.sampled_from(LAUNCH[engine]))
        safe = draw(mostly)
        main["args"] = draw(st.lists(st.sampled_from(SAFE_ARGS if safe else TOKENS), max_size=6))
        if draw(st.booleans()):
            main["env"] = draw(env_entries)
        if not draw(mostly):
            main["volumeMounts"] = draw(mounts)
        listed = [main]
        if draw(st.booleans()):
            listed.append({"name": "proxy", "image": "envoy", "command": ["envoy"]})
            if draw(mostly):
                notes[P + "container"] = "server"
    else:
        listed = draw(st.lists(containers, max_size=3))
    spec: dict[str, Any] = {"containers": listed}
    if draw(st.booleans()):
        spec["volumes"] = draw(volumes) if not draw(mostly) else [{"name": "w", "emptyDir": {}}]
    if draw(st.booleans()):
        spec["initContainers"] = [{"name": "setup", "image": "busybox"}]
    spec["nodeSelector"] = {"kubernetes.io/os": "linux"}
    label = draw(st.sampled_from(["true", "true", "true", "false"]))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": NS,
            "labels": {P + "inject": label},
            "annotations": notes,
        },
        "spec": spec,
    }


HEALTHY_LEDGER = [
    [{"type": "QuotaLedgerAvailable", "status": "True"}],
    [{"type": "QuotaLedgerAvailable", "status": "False", "reason": "MultiTenancyDisabled"}],
]
SICK_LEDGER = [
    [{"type": "QuotaLedgerAvailable", "status": "False", "reason": "LedgerUnreachable"}],
    [{"type": "QuotaLedgerAvailable", "status": "Unknown"}],
    [],
]


@st.composite
def worlds(draw: st.DrawFn) -> StaticLookups:
    """A Binding, pool and backend, most of them usable."""
    healthy = draw(mostly)
    condition = draw(st.sampled_from(HEALTHY_LEDGER if healthy else HEALTHY_LEDGER + SICK_LEDGER))
    endpoint = "m:1" if healthy else draw(st.sampled_from(["m:1", ""]))
    if healthy:
        backend = draw(st.sampled_from(["Auto", "CANN", "RDMA"]))
        protocols = draw(
            st.lists(st.sampled_from([None, "CANN"] if backend == "CANN" else [None]), max_size=2)
        )
    else:
        backend = draw(st.sampled_from(["Auto", "CANN", "RDMA"]))
        protocols = draw(
            st.lists(st.sampled_from([None, "Auto", "RDMA", "CANN", "EFA"]), max_size=2)
        )
    members = [{"transport": {"protocol": p}} if p else {} for p in protocols]
    objects: list[Any] = [
        KVCachePoolBinding.model_validate(
            {
                "metadata": {"name": "chat", "namespace": NS},
                "spec": {
                    "poolRef": {"name": "pool"},
                    "domain": {
                        "name": "d",
                        "blockSize": 16,
                        "dtype": draw(st.sampled_from(["fp8", ""])),
                    },
                },
            }
        ),
        KVCachePool.model_validate(
            {
                "metadata": {"name": "pool"},
                "spec": {"backends": ["be"]},
                "status": {"clientEndpoint": endpoint, "conditions": condition},
            }
        ),
        KVCacheBackend.model_validate(
            {
                "metadata": {"name": "be"},
                "spec": {
                    "transport": {"protocol": backend},
                    "connection": {"managed": {"members": members}},
                },
            }
        ),
    ]
    return StaticLookups.of(objects)


dtype_settings = st.builds(Settings, kv_cache_dtype_owned=st.booleans())

# --- properties -------------------------------------------------------------------------------

SLOW = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(pod=json_values, lookups=worlds())
def test_never_raises_on_arbitrary_json(pod: Any, lookups: StaticLookups) -> None:
    obj = pod if isinstance(pod, dict) else {"spec": pod}
    obj.setdefault(
        "metadata",
        {
            "labels": {P + "inject": "true"},
            "annotations": {P + "engine": "vLLM", P + "binding": "chat"},
        },
    )
    before = copy.deepcopy(obj)
    result = inject_pod(obj, namespace=NS, lookups=lookups, settings=Settings())
    assert obj == before
    operations: tuple[Operation, ...] = ("CREATE", "UPDATE")
    for operation in operations:
        request = AdmissionRequest(operation=operation, object=obj, old_object=obj, namespace=NS)
        review_pod(request, lookups=lookups, settings=Settings())
    if result.refusal is not None:
        assert result.pod == before


@st.composite
def mangled_pods(draw: st.DrawFn) -> dict[str, Any]:
    """Generated Pods with one field replaced by arbitrary JSON."""
    pod = draw(pods())
    where = draw(
        st.sampled_from(
            [
                "metadata",
                "labels",
                "annotations",
                "spec",
                "containers",
                "container",
                "env",
                "command",
                "volumes",
            ]
        )
    )
    junk = draw(json_values)
    if where in ("metadata", "spec"):
        pod[where] = junk
    elif where in ("labels", "annotations"):
        pod["metadata"][where] = junk
    elif where in ("containers", "volumes"):
        pod["spec"][where] = junk
    elif pod["spec"]["containers"]:
        if where == "container":
            pod["spec"]["containers"][0] = junk
        else:
            pod["spec"]["containers"][0][where] = junk
    return pod


@SLOW
@given(pod=mangled_pods(), lookups=worlds(), config=dtype_settings)
def test_never_raises_on_malformed_pods(
    pod: dict[str, Any], lookups: StaticLookups, config: Settings
) -> None:
    before = copy.deepcopy(pod)
    result = inject_pod(pod, namespace=NS, lookups=lookups, settings=config)
    assert pod == before
    if not result.injected:
        assert result.pod == before


def _strip_allowed(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """The Pod without what injection may change."""
    out = copy.deepcopy(pod)
    notes = out["metadata"].get("annotations", {})
    for key in WRITTEN:
        notes.pop(key, None)
    out["spec"].pop("volumes", None)
    for key in ("args", "env", "volumeMounts"):
        out["spec"]["containers"][index].pop(key, None)
    return out


@SLOW
@given(pod=pods(), lookups=worlds(), config=dtype_settings)
def test_refused_unchanged_admitted_confined(
    pod: dict[str, Any], lookups: StaticLookups, config: Settings
) -> None:
    before = copy.deepcopy(pod)
    result = inject_pod(pod, namespace=NS, lookups=lookups, settings=config)
    assert pod == before, "the input was modified"
    again = inject_pod(pod, namespace=NS, lookups=lookups, settings=config)
    assert again == result, "not deterministic"
    request = AdmissionRequest(operation="CREATE", object=pod, namespace=NS)
    verdict = review_pod(request, lookups=lookups, settings=config)
    if not result.injected:
        assert result.pod == before
        assert not verdict.patch
        assert verdict.allowed is (result.refusal is None)
        return
    assert verdict.allowed
    assert jsonpatch.apply_patch(before, verdict.patch) == result.pod
    out = dict(result.pod)
    names = [c["name"] for c in before["spec"]["containers"]]
    named = before["metadata"]["annotations"].get(P + "container") or names[0]
    index = names.index(named)
    assert _strip_allowed(out, index) == _strip_allowed(before, index)
    # What was there stays there: the user's args lead, volumes and mounts are only appended.
    old_c, new_c = before["spec"]["containers"][index], out["spec"]["containers"][index]
    assert new_c["args"][: len(old_c.get("args", []))] == old_c.get("args", [])
    old_mounts = old_c.get("volumeMounts", [])
    assert new_c.get("volumeMounts", [])[: len(old_mounts)] == old_mounts
    old_volumes = before["spec"].get("volumes", [])
    assert out["spec"].get("volumes", [])[: len(old_volumes)] == old_volumes
    # The user's env keeps its order; the one entry that may go is a tenant on a single-tenant
    # SGLang store (the tenant is Binding-owned, and none is written there).
    record = parse_record(out["metadata"]["annotations"][P + "injected"])
    assert record is not None
    withdrawn = (
        {"MOONCAKE_TENANT_ID"}
        if record.vehicle == "environment" and not record.tenant_injected
        else set()
    )
    kept = [e["name"] for e in old_c.get("env", []) if e["name"] not in withdrawn]
    assert [e["name"] for e in new_c["env"]][: len(kept)] == kept
    assert not withdrawn & {e["name"] for e in new_c["env"]}
    assert P + "injected" in out["metadata"]["annotations"]


@st.composite
def copy_on_write_edits(draw: st.DrawFn) -> tuple[Any, Any]:
    """A JSON document and a copy-on-write edit of it (shared branches stay shared)."""
    src = draw(st.dictionaries(st.text(max_size=3), json_values, max_size=4))

    def edit(node: Any, depth: int) -> Any:
        if isinstance(node, dict) and node and depth < 4 and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node)))
            return {**node, key: edit(node[key], depth + 1)}
        if isinstance(node, list) and node and depth < 4 and draw(st.booleans()):
            i = draw(st.integers(0, len(node) - 1))
            return [*node[:i], edit(node[i], depth + 1), *node[i + 1 :]]
        action = draw(st.sampled_from(["replace", "append", "add", "remove"]))
        if action == "append" and isinstance(node, list):
            return [*node, draw(json_values)]
        if action == "add" and isinstance(node, dict):
            return {**node, draw(st.text(max_size=3)): draw(json_values)}
        if action == "remove" and isinstance(node, dict) and node:
            drop = draw(st.sampled_from(sorted(node)))
            return {k: v for k, v in node.items() if k != drop}
        return draw(json_values)

    edits = draw(st.integers(1, 3))
    dst = src
    for _ in range(edits):
        dst = edit(dst, 0)
    return src, dst


@SLOW
@given(pair=copy_on_write_edits())
def test_pruned_patch_is_exact(pair: tuple[Any, Any]) -> None:
    src, dst = pair
    ops = pruned_patch(src, dst)
    assert jsonpatch.apply_patch(json.loads(json.dumps(src)), ops) == dst
