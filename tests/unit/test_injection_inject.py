"""CREATE injection end to end: resolution refusals, container choice, owned keys, mutation."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.errors import Verdict, VerdictKind
from gpustack_render.core.review import AdmissionRequest, Operation
from gpustack_render.core.settings import Settings
from gpustack_render.injection import InjectionResult, inject_pod, parse_record, review_pod
from gpustack_render.schema.lookups import StaticLookups

P = "kvcache.gpustack.ai/"
NS = "team-a"
ENDPOINT = "dram-pool-master.gpustack-system.svc:50051"


def make_pod(
    *,
    engine: str = "vLLM",
    annotations: dict[str, Any] | None = None,
    container: dict[str, Any] | None = None,
    containers: list[dict[str, Any]] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    notes: dict[str, Any] = {P + "binding": "chat", P + "engine": engine}
    for key, value in (annotations or {}).items():
        if value is None:
            notes.pop(key, None)
        else:
            notes[key] = value
    command = ["vllm"] if engine == "vLLM" else ["python3", "-m", "sglang.launch_server"]
    main = {"name": "server", "image": "engine:1", "command": command, "args": ["--model", "m"]}
    main.update(container or {})
    main = {k: v for k, v in main.items() if v is not None}
    pod_spec: dict[str, Any] = {"containers": containers if containers is not None else [main]}
    pod_spec.update(spec or {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "chat-0",
            "namespace": NS,
            "labels": {P + "inject": "true", "app": "chat"},
            "annotations": notes,
        },
        "spec": pod_spec,
    }


LEDGER_TRUE = {"type": "QuotaLedgerAvailable", "status": "True"}


def make_lookups(
    *,
    binding: dict[str, Any] | None = None,
    pool_status: dict[str, Any] | None = None,
    backend_spec: dict[str, Any] | None = None,
    drop: tuple[str, ...] = (),
    failing: tuple[tuple[str, str, str], ...] = (),
) -> StaticLookups:
    b = {
        "metadata": {"name": "chat", "namespace": NS},
        "spec": {
            "poolRef": {"name": "dram-pool"},
            "domain": {"name": "team-a-chat", "blockSize": 16, "dtype": "bfloat16"},
        },
    }
    if binding:
        b = {**b, **binding}
    status = {"clientEndpoint": ENDPOINT, "conditions": [LEDGER_TRUE]}
    status.update(pool_status or {})
    objects: list[Any] = []
    if "binding" not in drop:
        objects.append(KVCachePoolBinding.model_validate(b))
    if "pool" not in drop:
        objects.append(
            KVCachePool.model_validate(
                {
                    "metadata": {"name": "dram-pool"},
                    "spec": {"backends": ["dram-backend"]},
                    "status": status,
                }
            )
        )
    if "backend" not in drop:
        objects.append(
            KVCacheBackend.model_validate(
                {
                    "metadata": {"name": "dram-backend"},
                    "spec": backend_spec or {"transport": {"protocol": "Auto"}},
                }
            )
        )
    out = StaticLookups.of(objects)
    out.failing = set(failing)
    return out


def run(
    pod: dict[str, Any], lookups: StaticLookups | None = None, settings: Settings | None = None
) -> InjectionResult:
    return inject_pod(
        pod, namespace=NS, lookups=lookups or make_lookups(), settings=settings or Settings()
    )


def rule(result: InjectionResult) -> str:
    assert result.refusal is not None, "expected a refusal"
    return result.refusal.rule


def target(result: InjectionResult, index: int = 0) -> dict[str, Any]:
    assert result.injected, result.refusal
    container: dict[str, Any] = result.pod["spec"]["containers"][index]
    return container


# --- resolution (steps 7–12) -------------------------------------------------------------------

RESOLUTION = [
    pytest.param(
        {P + "binding": None}, {}, "inject.binding-required", id="inject.binding-required-absent"
    ),
    pytest.param(
        {P + "binding": ""}, {}, "inject.binding-required", id="inject.binding-required-empty"
    ),
    pytest.param(
        {P + "binding": "team-b/chat"},
        {},
        "inject.binding-cross-namespace",
        id="inject.binding-cross-namespace-slash",
    ),
    pytest.param(
        {},
        {"drop": ("binding",)},
        "inject.binding-not-found",
        id="inject.binding-not-found-not-found",
    ),
    pytest.param(
        {},
        {"binding": {"metadata": {"name": "chat", "namespace": "team-b"}}},
        "inject.binding-not-found",
        id="inject.binding-not-found-other-namespace",
    ),
    pytest.param(
        {},
        {"failing": (("KVCachePoolBinding", NS, "chat"),)},
        "inject.binding-unreadable",
        id="inject.binding-unreadable-read-error",
    ),
    pytest.param(
        {},
        {
            "binding": {
                "metadata": {
                    "name": "chat",
                    "namespace": NS,
                    "deletionTimestamp": "2025-01-01T00:00:00Z",
                }
            }
        },
        "inject.binding-terminating",
        id="inject.binding-terminating-terminating",
    ),
    pytest.param(
        {}, {"drop": ("pool",)}, "inject.pool-not-found", id="inject.pool-not-found-pool-missing"
    ),
    pytest.param(
        {},
        {"failing": (("KVCachePool", "", "dram-pool"),)},
        "inject.pool-unreadable",
        id="inject.pool-unreadable-read-error",
    ),
    pytest.param(
        {},
        {"pool_status": {"conditions": []}},
        "inject.ledger-absent",
        id="inject.ledger-absent-absent",
    ),
    pytest.param(
        {},
        {"pool_status": {"conditions": [{"type": "QuotaLedgerAvailable", "status": "Unknown"}]}},
        "inject.ledger-unknown",
        id="inject.ledger-unknown",
    ),
    pytest.param(
        {},
        {
            "pool_status": {
                "conditions": [
                    {
                        "type": "QuotaLedgerAvailable",
                        "status": "False",
                        "reason": "LedgerUnreachable",
                        "message": "dial tcp: refused",
                    }
                ]
            }
        },
        "inject.ledger-unavailable",
        id="inject.ledger-unavailable-unreachable",
    ),
    pytest.param(
        {},
        {"drop": ("backend",)},
        "inject.backend-not-found",
        id="inject.backend-not-found-backend-missing",
    ),
    pytest.param(
        {},
        {"failing": (("KVCacheBackend", "", "dram-backend"),)},
        "inject.backend-unreadable",
        id="inject.backend-unreadable-read-error",
    ),
    pytest.param(
        {},
        {"pool_status": {"clientEndpoint": ""}},
        "inject.pool-without-endpoint",
        id="inject.pool-without-endpoint-no-endpoint",
    ),
    pytest.param(
        {},
        {
            "backend_spec": {
                "transport": {"protocol": "RDMA"},
                "connection": {"managed": {"members": [{}, {"transport": {"protocol": "TCP"}}]}},
            }
        },
        "inject.transport-mixed",
        id="inject.transport-mixed-mixed",
    ),
    pytest.param(
        {P + "manufacturer": "ascend"},
        {},
        "inject.transport-unsupported",
        id="inject.transport-unsupported-ascend-on-tcp",
    ),
]


@pytest.mark.parametrize(("notes", "lookup", "expected"), RESOLUTION)
def test_resolution_refusals(notes: dict[str, Any], lookup: dict[str, Any], expected: str) -> None:
    pod = make_pod(annotations=notes)
    before = copy.deepcopy(pod)
    result = run(pod, make_lookups(**lookup))
    assert rule(result) == expected, result.refusal
    assert result.pod == before


def test_pool_without_backend() -> None:
    # The schema refuses an empty spec.backends, so only a hand-built pool reaches
    # inject.pool-without-backend.
    lookups = make_lookups()
    pool = lookups.pools["dram-pool"]
    lookups.pools["dram-pool"] = pool.model_copy(
        update={"spec": pool.spec.model_copy(update={"backends": []})}
    )
    assert rule(run(make_pod(), lookups)) == "inject.pool-without-backend"


@pytest.mark.parametrize(
    ("lookup", "facts"),
    [
        pytest.param({"drop": ("binding",)}, ["'chat'", "'team-a'"], id="inject.binding-not-found"),
        pytest.param(
            {"drop": ("pool",)}, ["'chat'", "'team-a'", "'dram-pool'"], id="inject.pool-not-found"
        ),
        pytest.param(
            {"failing": (("KVCachePool", "", "dram-pool"),)},
            ["'dram-pool'", "injected failure"],
            id="inject.pool-unreadable",
        ),
        pytest.param(
            {
                "pool_status": {
                    "conditions": [
                        {
                            "type": "QuotaLedgerAvailable",
                            "status": "False",
                            "reason": "LedgerUnreachable",
                            "message": "dial tcp: refused",
                        }
                    ]
                }
            },
            ["'dram-pool'", "LedgerUnreachable", "dial tcp: refused"],
            id="inject.ledger-unavailable",
        ),
        pytest.param(
            {"drop": ("backend",)}, ["'dram-pool'", "'dram-backend'"], id="inject.backend-not-found"
        ),
        pytest.param(
            {
                "backend_spec": {
                    "transport": {"protocol": "EFA"},
                    "connection": {
                        "managed": {"members": [{}, {"transport": {"protocol": "RDMA"}}]}
                    },
                }
            },
            ['"efa"', '"rdma"', "NotSupportedTransport", "vllm"],
            id="inject.transport-mixed",
        ),
    ],
)
def test_resolution_messages_name_the_facts(lookup: dict[str, Any], facts: list[str]) -> None:
    result = run(make_pod(), make_lookups(**lookup))
    assert result.refusal is not None
    for fact in facts:
        assert fact in result.refusal.message


def test_transport_unsupported_names_both_spellings() -> None:
    result = run(make_pod(annotations={P + "manufacturer": "ascend"}))
    assert result.refusal is not None
    message = result.refusal.message
    assert all(
        s in message for s in ("TransportUnsupported", "vllm-ascend", "'ascend'", '"tcp"', "CANN")
    )


def test_transport_unsupported_with_empty_offers() -> None:
    lookups = make_lookups()
    backend = lookups.backends["dram-backend"]
    transport = backend.spec.transport.model_copy(update={"protocol": "NVLINK"})
    lookups.backends["dram-backend"] = backend.model_copy(
        update={"spec": backend.spec.model_copy(update={"transport": transport})}
    )
    result = run(make_pod(), lookups)
    assert rule(result) == "inject.transport-unsupported"
    assert result.refusal is not None and '[""]' in result.refusal.message


def test_mixed_pool_is_fine_for_vllm_ascend() -> None:
    spec = {
        "transport": {"protocol": "Auto"},
        "connection": {"managed": {"members": [{}, {"transport": {"protocol": "CANN"}}]}},
    }
    result = run(
        make_pod(annotations={P + "manufacturer": "ascend"}), make_lookups(backend_spec=spec)
    )
    config = json.loads(result.pod["metadata"]["annotations"][P + "client-config"])
    assert config["protocol"] == "ascend"
    assert '"kv_connector":"AscendStoreConnector"' in target(result)["args"][-3]


# --- the target container (step 16) --------------------------------------------------------------

SIDE = {"name": "proxy", "image": "envoy", "command": ["envoy"]}


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(
            make_pod(containers=[]), "inject.no-containers", id="inject.no-containers-none"
        ),
        pytest.param(
            make_pod(spec={"containers": None}),
            "inject.no-containers",
            id="inject.no-containers-null",
        ),
        pytest.param(
            make_pod(containers=[SIDE, {**SIDE, "name": "server"}]),
            "inject.container-unnamed",
            id="inject.container-unnamed-two-unnamed",
        ),
        pytest.param(
            make_pod(annotations={P + "container": ""}, containers=[SIDE, {**SIDE, "name": "b"}]),
            "inject.container-unnamed",
            id="inject.container-unnamed-empty-name",
        ),
        pytest.param(
            make_pod(
                annotations={P + "container": "setup"}, spec={"initContainers": [{"name": "setup"}]}
            ),
            "inject.init-container",
            id="inject.init-container",
        ),
        pytest.param(
            make_pod(annotations={P + "container": "main"}),
            "inject.container-not-found",
            id="inject.container-not-found-single-misnamed",
        ),
    ],
)
def test_container_refusals(pod: dict[str, Any], expected: str) -> None:
    assert rule(run(pod)) == expected


def test_named_container_among_several() -> None:
    main = {"name": "server", "command": ["vllm"], "args": ["serve"]}
    pod = make_pod(annotations={P + "container": "server"}, containers=[SIDE, main])
    result = run(pod)
    assert target(result, 1)["args"][:2] == ["serve", "--kv-transfer-config"]
    assert result.pod["spec"]["containers"][0] == SIDE


def test_container_unnamed_names_count_and_containers() -> None:
    result = run(make_pod(containers=[SIDE, {**SIDE, "name": "server"}]))
    assert result.refusal is not None
    assert "2 containers" in result.refusal.message and "proxy, server" in result.refusal.message


# --- owned keys and configuration sources (steps 17–18) -----------------------------------------

OWNED = [
    pytest.param(
        "vLLM",
        {"env": [{"name": "MOONCAKE_CONFIG_PATH", "value": "/x"}]},
        None,
        "inject.owned-env",
        id="inject.owned-env-vllm",
    ),
    pytest.param(
        "vLLM",
        {"args": ["serve", "--kv-transfer-config", "{}"]},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-exact",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv_transfer_config.kv_role=kv_both"]},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-underscore-dotted",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv-transfer-conf={}"]},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-prefix",
    ),
    pytest.param(
        "vLLM",
        {"command": ["vllm", "serve", "--kv-transfer-config={}"], "args": None},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-in-command",
    ),
    pytest.param(
        "SGLang",
        {"args": ["--hicache-storage-backend=mooncake"]},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-sglang",
    ),
    pytest.param(
        "SGLang",
        {"args": ["--hicache-storage-b", "file"]},
        None,
        "inject.owned-flag",
        id="inject.owned-flag-sglang-prefix",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv-cache-dtype", "fp8"]},
        None,
        "inject.dtype-flag",
        id="inject.dtype-flag-exact",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv_cache_dtype=fp8"]},
        None,
        "inject.dtype-flag",
        id="inject.dtype-flag-underscore",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv-cache", "fp8"]},
        None,
        "inject.dtype-flag",
        id="inject.dtype-flag-prefix",
    ),
    pytest.param(
        "SGLang",
        {"args": ["--kv-cache-dtype=fp8_e5m2"]},
        None,
        "inject.dtype-flag",
        id="inject.dtype-flag-sglang",
    ),
    pytest.param(
        "vLLM",
        {},
        {"volumes": [{"name": "gpustack-kvcache-config", "emptyDir": {}}]},
        "inject.owned-volume",
        id="inject.owned-volume",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "gpustack-kvcache-config", "mountPath": "/x"}]},
        None,
        "inject.owned-mount-name",
        id="inject.owned-mount-name",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "cfg", "mountPath": "/etc/gpustack/kvcache"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "cfg", "mountPath": "/etc/gpustack/kvcache/"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-trailing-slash",
    ),
    # Paths compare as paths, both ways: a file mounted over the projected one with subPath,
    # a deeper directory, a parent, and spellings the runtime resolves to the same path.
    pytest.param(
        "vLLM",
        {
            "volumeMounts": [
                {
                    "name": "cfg",
                    "mountPath": "/etc/gpustack/kvcache/mooncake.json",
                    "subPath": "mooncake.json",
                }
            ]
        },
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-subpath-file-inside",
    ),
    # A relative mountPath passes API validation and the kubelet mounts it from "/": the same
    # shadowing file, so the same refusal.
    pytest.param(
        "vLLM",
        {
            "volumeMounts": [
                {
                    "name": "cfg",
                    "mountPath": "etc/gpustack/kvcache/mooncake.json",
                    "subPath": "mooncake.json",
                }
            ]
        },
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-relative-subpath-file-inside",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "etc/gpustack/kvcache"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-relative-at",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "../etc/gpustack"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-relative-dotdot-parent",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "/etc/gpustack/kvcache/x/y"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-inside",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "/etc/gpustack"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-parent",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "//etc/./gpustack/x/../kvcache//"}]},
        None,
        "inject.owned-mount-path",
        id="inject.owned-mount-path-unnormalised",
    ),
    pytest.param(
        "SGLang",
        {"envFrom": [{"configMapRef": {"name": "mine"}}]},
        None,
        "inject.env-from-owned-prefix",
        id="inject.env-from-owned-prefix-env-from-no-prefix",
    ),
    pytest.param(
        "SGLang",
        {"envFrom": [{"prefix": "APP_", "secretRef": {"name": "s"}}, {"prefix": "SGLANG_HI"}]},
        None,
        "inject.env-from-owned-prefix",
        id="inject.env-from-owned-prefix-env-from-prefix-that-spells-it",
    ),
    pytest.param(
        "SGLang",
        {"env": [{"name": "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "value": "/c"}]},
        None,
        "inject.config-source-env",
        id="inject.config-source-env",
    ),
    pytest.param(
        "SGLang",
        {"args": ["--hicache-storage-backend-extra-config", "{}"]},
        None,
        "inject.config-source-flag",
        id="inject.config-source-flag",
    ),
    pytest.param(
        "SGLang",
        {"args": ["--hicache-storage-backend-e={}"]},
        None,
        "inject.config-source-flag",
        id="inject.config-source-flag-prefix",
    ),
    pytest.param(
        "vLLM",
        {
            "env": [{"name": "MOONCAKE_CONFIG_PATH", "value": "/x"}],
            "args": ["--kv-transfer-config", "{}"],
        },
        None,
        "inject.owned-env",
        id="order-env-before-flags",
    ),
    pytest.param(
        "vLLM",
        {"args": ["--kv-cache-dtype", "fp8", "--kv-transfer-config", "{}"]},
        None,
        "inject.owned-flag",
        id="order-owned-flag-before-dtype",
    ),
    pytest.param(
        "SGLang",
        {
            "env": [{"name": "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "value": "/c"}],
            "args": ["--kv-cache-dtype", "x"],
        },
        None,
        "inject.dtype-flag",
        id="order-owned-before-source",
    ),
    pytest.param(
        "vLLM",
        {"command": ["bash", "-c", "vllm"], "args": ["--kv-cache-dtype", "x"]},
        None,
        "inject.dtype-flag",
        id="order-owned-before-launch",
    ),
]


@pytest.mark.parametrize(("engine", "container", "spec", "expected"), OWNED)
def test_owned_key_refusals(
    engine: str, container: dict[str, Any], spec: dict[str, Any] | None, expected: str
) -> None:
    assert rule(run(make_pod(engine=engine, container=container, spec=spec))) == expected


def test_spelled_flag_in_message() -> None:
    result = run(make_pod(container={"args": ["--kv_transfer_config.kv_role=x"]}))
    assert result.refusal is not None
    assert "--kv_transfer_config.kv_role (read as --kv-transfer-config)" in result.refusal.message
    exact = run(make_pod(container={"args": ["--kv-cache-dtype", "fp8"]}))
    assert exact.refusal is not None and "passes --kv-cache-dtype:" in exact.refusal.message


NOT_REFUSED = [
    pytest.param(
        "SGLang",
        {"env": [{"name": "MOONCAKE_CONFIG_PATH", "value": "/x"}]},
        None,
        id="config-path-on-sglang",
    ),
    pytest.param(
        "vLLM", {"args": ["--hicache-storage-backend", "file"]}, None, id="sglang-flag-on-vllm"
    ),
    pytest.param(
        "vLLM",
        {"env": [{"name": "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", "value": "/c"}]},
        None,
        id="sglang-env-on-vllm",
    ),
    pytest.param(
        "vLLM", {"args": ["--kv-cache-dtype-skip-layers", "0"]}, None, id="longer-dtype-sibling"
    ),
    pytest.param(
        "SGLang", {"args": ["--kv_cache_dtype", "x"]}, None, id="sglang-reads-no-underscores"
    ),
    pytest.param(
        "vLLM", {"args": ["-kv-transfer-config", "x"]}, None, id="single-dash-never-matches"
    ),
    pytest.param(
        "SGLang",
        {},
        {"volumes": [{"name": "gpustack-kvcache-config", "emptyDir": {}}]},
        id="volume-name-on-sglang",
    ),
    pytest.param(
        "SGLang",
        {"volumeMounts": [{"name": "c", "mountPath": "/etc/gpustack/kvcache"}]},
        {"volumes": [{"name": "c", "emptyDir": {}}]},
        id="mount-path-on-sglang",
    ),
    pytest.param(
        "vLLM",
        {"volumeMounts": [{"name": "c", "mountPath": "/etc/gpustack-kvcache"}]},
        None,
        id="sibling-with-the-same-prefix-string",
    ),
    pytest.param(
        "SGLang",
        {"envFrom": [{"prefix": "APP_", "configMapRef": {"name": "mine"}}]},
        None,
        id="env-from-with-a-safe-prefix",
    ),
    pytest.param(
        "vLLM", {"envFrom": [{"configMapRef": {"name": "mine"}}]}, None, id="env-from-on-vllm"
    ),
]


@pytest.mark.parametrize(("engine", "container", "spec"), NOT_REFUSED)
def test_keys_other_engines_own_are_not_refused(
    engine: str, container: dict[str, Any], spec: dict[str, Any] | None
) -> None:
    result = run(make_pod(engine=engine, container=container, spec=spec))
    assert result.injected, result.refusal


def test_dtype_setting_off_admits_the_flag_and_renders_none() -> None:
    pod = make_pod(container={"args": ["serve", "--kv-cache-dtype", "fp8"]})
    off = Settings(kv_cache_dtype_owned=False)
    result = run(pod, settings=off)
    args = target(result)["args"]
    assert args == [
        "serve",
        "--kv-cache-dtype",
        "fp8",
        "--kv-transfer-config",
        '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
    ]
    assert rule(run(pod)) == "inject.dtype-flag"


def test_empty_binding_dtype_renders_no_flag_and_admits_users() -> None:
    lookups = make_lookups()
    b = lookups.bindings[(NS, "chat")]
    domain = b.spec.domain.model_copy(update={"dtype": ""})
    lookups.bindings[(NS, "chat")] = b.model_copy(
        update={"spec": b.spec.model_copy(update={"domain": domain})}
    )
    result = run(make_pod(container={"args": ["--kv-cache-dtype", "auto"]}), lookups)
    assert target(result)["args"][-2:] == [
        "--kv-transfer-config",
        '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
    ]


# --- mutation (step 20) ---------------------------------------------------------------------


def test_vllm_file_vehicle() -> None:
    pod = make_pod(
        container={
            "env": [{"name": "A", "value": "1"}],
            "volumeMounts": [{"name": "w", "mountPath": "/w"}],
        },
        spec={"volumes": [{"name": "w", "emptyDir": {}}]},
    )
    result = run(pod)
    main = target(result)
    assert main["command"] == ["vllm"]
    assert main["args"] == [
        "--model",
        "m",
        "--kv-transfer-config",
        '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
        "--kv-cache-dtype",
        "bfloat16",
    ]
    assert main["env"] == [
        {"name": "A", "value": "1"},
        {"name": "MOONCAKE_CONFIG_PATH", "value": "/etc/gpustack/kvcache/mooncake.json"},
        {"name": "MC_TE_METRIC", "value": "1"},
        {"name": "MC_STORE_CLIENT_METRIC_BANDWIDTH", "value": "1"},
    ]
    assert main["volumeMounts"][-1] == {
        "name": "gpustack-kvcache-config",
        "mountPath": "/etc/gpustack/kvcache",
        "readOnly": True,
    }
    assert [v["name"] for v in result.pod["spec"]["volumes"]] == ["w", "gpustack-kvcache-config"]
    notes = result.pod["metadata"]["annotations"]
    assert list(notes)[-2:] == [P + "client-config", P + "injected"]
    assert json.loads(notes[P + "client-config"]) == {
        "metadata_server": "P2PHANDSHAKE",
        "master_server_address": ENDPOINT,
        "protocol": "tcp",
        "device_name": "",
        "mode": "standalone-store",
        "global_segment_size": 0,
        "local_buffer_size": 134217728,
        "tenant_id": "team-a-chat",
    }
    assert notes[P + "injected"] == (
        '{"binding":"chat","engine":"vllm","vehicle":"file","domain":"team-a-chat",'
        '"tenantInjected":true,"launchProgram":"vllm","launchArgsForwarded":false}'
    )
    assert result.pod["metadata"]["labels"] == pod["metadata"]["labels"]


@pytest.mark.parametrize(
    ("role", "kv_role"),
    [
        pytest.param("Prefill", "kv_producer", id="prefill"),
        pytest.param("Decode", "kv_consumer", id="decode"),
        pytest.param(None, "kv_both", id="none"),
    ],
)
def test_vllm_role(role: str | None, kv_role: str) -> None:
    result = run(make_pod(annotations={P + "role": role}))
    assert json.loads(target(result)["args"][3]) == {
        "kv_connector": "MooncakeStoreConnector",
        "kv_role": kv_role,
    }


def test_sglang_environment_vehicle() -> None:
    pod = make_pod(engine="SGLang", container={"args": ["--model-path", "m"]})
    result = run(pod)
    main = target(result)
    assert main["args"] == [
        "--model-path",
        "m",
        "--hicache-storage-backend",
        "mooncake",
        "--kv-cache-dtype",
        "bfloat16",
        "--enable-hierarchical-cache",
    ]
    assert [e["name"] for e in main["env"]] == [
        "MOONCAKE_TENANT_ID",
        "MOONCAKE_MASTER",
        "MOONCAKE_TE_META_DATA_SERVER",
        "MOONCAKE_PROTOCOL",
        "MOONCAKE_DEVICE",
        "MOONCAKE_GLOBAL_SEGMENT_SIZE",
        "MOONCAKE_LOCAL_HOSTNAME",
        "MC_TE_METRIC",
        "MC_STORE_CLIENT_METRIC_BANDWIDTH",
    ]
    assert main["env"][4] == {"name": "MOONCAKE_DEVICE", "value": ""}
    assert main["env"][6] == {
        "name": "MOONCAKE_LOCAL_HOSTNAME",
        "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
    }
    assert "volumeMounts" not in main and "volumes" not in result.pod["spec"]
    notes = result.pod["metadata"]["annotations"]
    assert P + "client-config" not in notes
    assert parse_record(notes[P + "injected"]) is not None
    assert json.loads(notes[P + "injected"])["vehicle"] == "environment"


def test_sglang_ignores_the_role() -> None:
    plain = run(make_pod(engine="SGLang"))
    with_role = run(make_pod(engine="SGLang", annotations={P + "role": "Decode"}))
    assert target(plain) == target(with_role)
    assert not any(a.startswith("--disaggregation") for a in target(with_role)["args"])


def test_injected_env_overwrites_in_place() -> None:
    env = [
        {"name": "MOONCAKE_MASTER", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}},
        {"name": "KEEP", "value": "x"},
        {"name": "MOONCAKE_TENANT_ID", "value": "other-tenant"},
        {"name": "MOONCAKE_TENANT_ID", "value": "again"},
        {"name": "MC_TE_METRIC", "value": "0"},
    ]
    result = run(make_pod(engine="SGLang", container={"env": env}))
    out = target(result)["env"]
    assert out[0] == {"name": "MOONCAKE_MASTER", "value": ENDPOINT}
    assert out[1] == {"name": "KEEP", "value": "x"}
    assert out[2] == out[3] == {"name": "MOONCAKE_TENANT_ID", "value": "team-a-chat"}
    assert out[4] == {"name": "MC_TE_METRIC", "value": "0"}
    names = [e["name"] for e in out]
    assert names.count("MOONCAKE_MASTER") == 1 and names.count("MC_TE_METRIC") == 1
    assert names[-1] == "MC_STORE_CLIENT_METRIC_BANDWIDTH"


SINGLE_TENANT = [
    {"type": "QuotaLedgerAvailable", "status": "False", "reason": "MultiTenancyDisabled"}
]


def test_single_tenant_sglang_removes_a_declared_tenant() -> None:
    """The tenant is Binding-owned: on a single-tenant store none is written, so a tenant the
    author declared (every declaration of it) is removed, never left for the engine to read."""
    env = [
        {"name": "MOONCAKE_TENANT_ID", "value": "team-b-chat"},
        {"name": "KEEP", "value": "x"},
        {"name": "MOONCAKE_TENANT_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    pod = make_pod(engine="SGLang", container={"env": env})
    result = run(pod, make_lookups(pool_status={"conditions": SINGLE_TENANT}))
    out = target(result)["env"]
    assert "MOONCAKE_TENANT_ID" not in [e["name"] for e in out]
    assert out[0] == {"name": "KEEP", "value": "x"}
    assert result.record is not None and result.record.tenant_injected is False
    verdict = review_pod(
        AdmissionRequest(operation="CREATE", object=pod, namespace=NS, name="chat-0"),
        lookups=make_lookups(pool_status={"conditions": SINGLE_TENANT}),
        settings=Settings(),
    )
    assert jsonpatch.apply_patch(pod, verdict.patch) == result.pod


@pytest.mark.parametrize(
    ("prefix", "conditions", "refused"),
    [
        pytest.param("MOONCAKE_", SINGLE_TENANT, True, id="single-tenant-mooncake-prefix"),
        pytest.param("MOONCAKE_TENANT_ID", SINGLE_TENANT, True, id="single-tenant-whole-name"),
        pytest.param("APP_", SINGLE_TENANT, False, id="single-tenant-other-prefix"),
        pytest.param("MOONCAKE_", [LEDGER_TRUE], False, id="multi-tenant-outranked-by-env"),
    ],
)
def test_single_tenant_sglang_refuses_an_env_from_that_could_supply_the_tenant(
    prefix: str, conditions: list[dict[str, Any]], refused: bool
) -> None:
    """With no tenant written, nothing outranks a MOONCAKE_TENANT_ID an envFrom supplies."""
    env_from = [{"prefix": prefix, "configMapRef": {"name": "mooncake"}}]
    result = run(
        make_pod(engine="SGLang", container={"envFrom": env_from}),
        make_lookups(pool_status={"conditions": conditions}),
    )
    if refused:
        assert rule(result) == "inject.env-from-owned-prefix"
        assert result.refusal is not None
        assert "envFrom[0]" in result.refusal.message
        assert "MOONCAKE_TENANT_ID" in result.refusal.message
    else:
        assert result.injected, result.refusal


def test_single_tenant_vllm_keeps_unrelated_env() -> None:
    """vLLM reads its tenant from the projected file only: the same variable is not its own."""
    env = [{"name": "MOONCAKE_TENANT_ID", "value": "x"}]
    result = run(
        make_pod(container={"env": env}), make_lookups(pool_status={"conditions": SINGLE_TENANT})
    )
    assert target(result)["env"][0] == {"name": "MOONCAKE_TENANT_ID", "value": "x"}


@pytest.mark.parametrize(
    "container",
    [
        pytest.param({"args": ["--enable-hierarchical-cache"]}, id="exact"),
        pytest.param({"args": ["--enable-hierarchical"]}, id="prefix"),
        pytest.param(
            {
                "command": ["python3", "-m", "sglang.launch_server", "--enable-hierarchical-cache"],
                "args": None,
            },
            id="in-command",
        ),
    ],
)
def test_sglang_default_dropped_when_named(container: dict[str, Any]) -> None:
    args = target(run(make_pod(engine="SGLang", container=container)))["args"]
    own = container.get("args") or []
    assert args.count("--enable-hierarchical-cache") == own.count("--enable-hierarchical-cache")
    assert args[-2:] == ["--kv-cache-dtype", "bfloat16"]


def test_command_only_container_gets_args() -> None:
    result = run(make_pod(container={"command": ["vllm", "serve", "m"], "args": None}))
    assert target(result)["command"] == ["vllm", "serve", "m"]
    assert target(result)["args"][0] == "--kv-transfer-config"


@pytest.mark.parametrize(
    ("conditions", "tenant", "injected"),
    [
        pytest.param([LEDGER_TRUE], "team-a-chat", True, id="ledger-true"),
        pytest.param(
            [{"type": "QuotaLedgerAvailable", "status": "False", "reason": "MultiTenancyDisabled"}],
            None,
            False,
            id="multi-tenancy-disabled",
        ),
    ],
)
def test_tenant_by_ledger(
    conditions: list[dict[str, Any]], tenant: str | None, injected: bool
) -> None:
    for engine in ("vLLM", "SGLang"):
        result = run(make_pod(engine=engine), make_lookups(pool_status={"conditions": conditions}))
        record = json.loads(result.pod["metadata"]["annotations"][P + "injected"])
        assert record["tenantInjected"] is injected
        assert record["domain"] == "team-a-chat"
        if engine == "vLLM":
            config = json.loads(result.pod["metadata"]["annotations"][P + "client-config"])
            assert config.get("tenant_id") == tenant
        else:
            env = {e["name"]: e.get("value") for e in target(result)["env"]}
            assert env.get("MOONCAKE_TENANT_ID") == tenant


def test_forwarded_launch_is_recorded() -> None:
    pod = make_pod(
        annotations={P + "launch-args-forwarded": "true"},
        container={"command": ["/entrypoint"], "args": ["serve"]},
    )
    record = json.loads(run(pod).pod["metadata"]["annotations"][P + "injected"])
    assert (record["launchProgram"], record["launchArgsForwarded"]) == ("entrypoint", True)


def test_input_is_never_mutated() -> None:
    pod = make_pod(engine="SGLang", container={"env": [{"name": "MOONCAKE_MASTER", "value": "x"}]})
    before = copy.deepcopy(pod)
    result = run(pod)
    assert result.injected
    assert pod == before


# --- review_pod ---------------------------------------------------------------------------------


def review(
    pod: dict[str, Any] | None,
    *,
    operation: Operation = "CREATE",
    old: dict[str, Any] | None = None,
) -> Verdict:
    request = AdmissionRequest(
        operation=operation, object=pod, old_object=old, namespace=NS, name="chat-0"
    )
    return review_pod(request, lookups=make_lookups(), settings=Settings())


def test_review_injects_with_a_patch() -> None:
    pod = make_pod()
    verdict = review(pod)
    assert verdict.allowed
    assert jsonpatch.apply_patch(pod, verdict.patch) == run(pod).pod


def test_review_refusal_is_forbidden_without_causes() -> None:
    verdict = review(make_pod(annotations={P + "domain": "x"}))
    assert verdict.kind is VerdictKind.FORBIDDEN
    assert (verdict.status_code(), verdict.status_reason(), verdict.origin) == (
        403,
        "Forbidden",
        "inject.domain-annotation",
    )
    assert not verdict.errors
    assert "domain" in verdict.to_response()["status"]["message"]


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(
            {**make_pod(), "metadata": {"labels": {P + "inject": "false"}}}, id="label-false"
        ),
        pytest.param({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, id="no-label"),
        pytest.param(None, id="no-object"),
    ],
)
def test_review_leaves_other_pods_alone(pod: dict[str, Any] | None) -> None:
    verdict = review(pod)
    assert verdict.allowed and not verdict.patch


def test_review_update_runs_the_freeze() -> None:
    old = run(make_pod()).pod
    new = copy.deepcopy(dict(old))
    new["metadata"]["labels"][P + "inject"] = "false"
    verdict = review(new, operation="UPDATE", old=dict(old))
    assert verdict.kind is VerdictKind.INVALID
    assert [e.origin for e in verdict.errors] == ["freeze.inject-label-removed"]
    assert verdict.to_response()["status"]["details"]["kind"] == "Pod"


def test_review_delete_is_allowed() -> None:
    assert review(None, operation="DELETE", old=make_pod()).allowed
