"""The shared store-client rendering: transport, tenancy, documents, vehicles."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.engines import connectors as c
from gpustack_render.engines import owned


def backend(
    protocol: str | None = "Auto", members: list[Any] | None = None, **leader: Any
) -> KVCacheBackend:
    spec: dict[str, Any] = {}
    if protocol is not None:
        spec["transport"] = {"protocol": protocol}
    managed: dict[str, Any] = {}
    if members is not None:
        managed["members"] = members
    if leader:
        managed["leader"] = leader
    if managed:
        spec["connection"] = {"managed": managed}
    return KVCacheBackend.model_validate({"metadata": {"name": "b"}, "spec": spec})


def pool(*conditions: dict[str, Any]) -> KVCachePool:
    return KVCachePool.model_validate(
        {
            "metadata": {"name": "p"},
            "spec": {"backends": ["b"]},
            "status": {"clientEndpoint": "m:50051", "conditions": list(conditions)},
        }
    )


def binding(domain: str | None = "team-a") -> KVCachePoolBinding:
    dom: dict[str, Any] = {"blockSize": 16, "dtype": "bfloat16"}
    if domain is not None:
        dom["name"] = domain
    return KVCachePoolBinding.model_validate(
        {
            "metadata": {"name": "x", "namespace": "n"},
            "spec": {"poolRef": {"name": "p"}, "domain": dom},
        }
    )


@pytest.mark.parametrize(
    ("api", "artifact"),
    [
        pytest.param("Auto", "tcp", id="auto"),
        pytest.param("TCP", "tcp", id="tcp"),
        pytest.param("", "tcp", id="empty"),
        pytest.param(None, "tcp", id="none"),
        pytest.param("RDMA", "rdma", id="rdma"),
        pytest.param("EFA", "efa", id="efa"),
        pytest.param("CANN", "ascend", id="cann"),
        pytest.param("ROCM", "hip", id="rocm"),
        pytest.param("MUSA", "musa", id="musa"),
        pytest.param("MACA", "maca", id="maca"),
        pytest.param("tcp", "", id="lowercase-is-unknown"),
        pytest.param("NVLINK", "", id="unknown"),
    ],
)
def test_artifact_transport(api: str | None, artifact: str) -> None:
    assert c.artifact_transport(api) == artifact


@pytest.mark.parametrize(
    ("b", "offers"),
    [
        pytest.param(backend("Auto"), ("tcp",), id="defaults"),
        pytest.param(backend(None), ("tcp",), id="backend-defaulted-transport"),
        pytest.param(backend("CANN", members=[]), ("ascend",), id="no-members-backend-wide"),
        pytest.param(
            backend("RDMA", members=[{}, {"transport": {"protocol": "CANN"}}, {"transport": {}}]),
            ("rdma", "ascend", "rdma"),
            id="members-override-in-order",
        ),
        pytest.param(
            backend("Auto", members=[{"transport": {"protocol": "EFA"}}]), ("efa",), id="one-group"
        ),
    ],
)
def test_transport_offers(b: KVCacheBackend, offers: tuple[str, ...]) -> None:
    assert c.transport_offers(b) == offers


@pytest.mark.parametrize(
    ("engine", "offers", "protocol", "failure"),
    [
        pytest.param("vllm", ["tcp"], "tcp", None, id="vllm-tcp"),
        pytest.param("vllm", ["rdma", "rdma"], "rdma", None, id="vllm-same-twice"),
        pytest.param("vllm", ["", "efa"], "efa", None, id="vllm-skips-empty"),
        pytest.param("vllm", ["tcp", "rdma"], "", c.TransportFailure.MIXED, id="vllm-mixed"),
        pytest.param(
            "sglang", ["rdma", "", "efa"], "", c.TransportFailure.MIXED, id="sglang-mixed"
        ),
        pytest.param("vllm", [""], "", c.TransportFailure.UNSUPPORTED, id="vllm-all-empty"),
        pytest.param("vllm-ascend", ["tcp"], "", c.TransportFailure.UNSUPPORTED, id="ascend-tcp"),
        pytest.param("vllm-ascend", ["ascend"], "ascend", None, id="ascend-ascend"),
        pytest.param("vllm-ascend", ["tcp", "ascend"], "ascend", None, id="ascend-mixed-is-fine"),
        pytest.param("vllm-ascend", [""], "", c.TransportFailure.UNSUPPORTED, id="ascend-empty"),
    ],
)
def test_check_transport(
    engine: str, offers: list[str], protocol: str, failure: c.TransportFailure | None
) -> None:
    check = c.check_transport(Engine(engine), offers)
    assert (check.protocol, check.failure) == (protocol, failure)
    assert check.offers == tuple(offers)


def test_match_transport_ignores_the_mixed_check() -> None:
    # An older binding keeps rendering its first offered transport (seed).
    assert c.match_transport(Engine.VLLM, ["tcp", "rdma"]) == "tcp"
    assert c.match_transport(Engine.VLLM_ASCEND, ["tcp", "ascend"]) == "ascend"
    assert c.match_transport(Engine.VLLM_ASCEND, ["tcp"]) is None


@pytest.mark.parametrize(
    ("conditions", "state", "resolved", "tenant"),
    [
        pytest.param([], c.LedgerState.ABSENT, False, "", id="absent"),
        pytest.param(
            [{"type": "QuotaLedgerAvailable", "status": "Unknown"}],
            c.LedgerState.UNKNOWN,
            False,
            "",
            id="unknown",
        ),
        pytest.param(
            [{"type": "QuotaLedgerAvailable", "status": "False", "reason": "LedgerUnreachable"}],
            c.LedgerState.UNAVAILABLE,
            False,
            "",
            id="false-unreachable",
        ),
        pytest.param(
            [{"type": "QuotaLedgerAvailable", "status": "False", "reason": "MultiTenancyDisabled"}],
            c.LedgerState.SINGLE_TENANT,
            True,
            "",
            id="false-multi-tenancy-disabled",
        ),
        pytest.param(
            [
                {"type": "Other", "status": "True"},
                {"type": "QuotaLedgerAvailable", "status": "True"},
            ],
            c.LedgerState.AVAILABLE,
            True,
            "team-a",
            id="true",
        ),
    ],
)
def test_resolve_tenant(
    conditions: list[dict[str, Any]], state: c.LedgerState, resolved: bool, tenant: str
) -> None:
    out = c.resolve_tenant(binding(), pool(*conditions))
    assert (out.state, out.resolved, out.tenant, out.domain) == (state, resolved, tenant, "team-a")


def test_resolve_tenant_default_domain() -> None:
    out = c.resolve_tenant(binding(None), pool({"type": "QuotaLedgerAvailable", "status": "True"}))
    assert (out.tenant, out.domain) == ("default", "default")


@pytest.mark.parametrize(
    ("multi", "resolved", "tenant"),
    [
        pytest.param({"multiTenancy": True}, True, "team-a", id="multi-tenant"),
        pytest.param({"multiTenancy": False}, True, "", id="single-tenant"),
        pytest.param({}, False, "", id="undeclared"),
    ],
)
def test_backend_fallback_only_for_an_absent_condition(
    multi: dict[str, Any], resolved: bool, tenant: str
) -> None:
    b = backend("Auto", **multi)
    out = c.resolve_tenant(binding(), pool(), backend_fallback=b)
    assert (out.resolved, out.tenant, out.from_backend) == (resolved, tenant, resolved)
    unknown = pool({"type": "QuotaLedgerAvailable", "status": "Unknown"})
    assert not c.resolve_tenant(binding(), unknown, backend_fallback=b).resolved


def test_client_config_document() -> None:
    text = c.client_config_json(endpoint="m:50051", transport="rdma", tenant="team-a")
    assert text == (
        '{"metadata_server":"P2PHANDSHAKE","master_server_address":"m:50051","protocol":"rdma",'
        '"device_name":"","mode":"standalone-store","global_segment_size":0,'
        '"local_buffer_size":134217728,"tenant_id":"team-a"}'
    )
    no_tenant = json.loads(c.client_config_json(endpoint="m:1", transport="tcp", tenant=""))
    assert "tenant_id" not in no_tenant
    assert list(no_tenant)[-1] == "local_buffer_size"


@pytest.mark.parametrize(
    ("engine", "kind", "doc"),
    [
        pytest.param(
            "vllm",
            None,
            '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
            id="server",
        ),
        pytest.param(
            "vllm",
            "prefill",
            '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_producer"}',
            id="prefill",
        ),
        pytest.param(
            "vllm",
            "decode",
            '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_consumer"}',
            id="decode",
        ),
        pytest.param(
            "vllm-ascend",
            "server",
            '{"kv_connector":"AscendStoreConnector","kv_role":"kv_both"}',
            id="ascend",
        ),
    ],
)
def test_store_transfer_config(engine: str, kind: str | None, doc: str) -> None:
    role = c.kv_role_for(None if kind is None else RoleKind(kind))
    assert c.compact_json(c.store_transfer_config(engine=Engine(engine), kv_role=role)) == doc


def test_sglang_env_order_and_values() -> None:
    env = c.sglang_store_env(endpoint="m:50051", transport="tcp", tenant="team-a")
    assert env == [
        {"name": "MOONCAKE_TENANT_ID", "value": "team-a"},
        {"name": "MOONCAKE_MASTER", "value": "m:50051"},
        {"name": "MOONCAKE_TE_META_DATA_SERVER", "value": "P2PHANDSHAKE"},
        {"name": "MOONCAKE_PROTOCOL", "value": "tcp"},
        {"name": "MOONCAKE_DEVICE", "value": ""},
        {"name": "MOONCAKE_GLOBAL_SEGMENT_SIZE", "value": "0"},
        {
            "name": "MOONCAKE_LOCAL_HOSTNAME",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        },
    ]
    no_tenant = c.sglang_store_env(endpoint="m:50051", transport="tcp", tenant="")
    assert [e["name"] for e in no_tenant] == [e["name"] for e in env[1:]]


@pytest.mark.parametrize(
    ("engine", "dtype", "args"),
    [
        pytest.param(
            "vllm",
            "fp8",
            [
                "--kv-transfer-config",
                '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
                "--kv-cache-dtype",
                "fp8",
            ],
            id="vllm-dtype",
        ),
        pytest.param(
            "vllm",
            "",
            [
                "--kv-transfer-config",
                '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both"}',
            ],
            id="vllm-no-dtype",
        ),
        pytest.param(
            "sglang",
            "bf16",
            ["--hicache-storage-backend", "mooncake", "--kv-cache-dtype", "bf16"],
            id="sglang-dtype",
        ),
        pytest.param("sglang", "", ["--hicache-storage-backend", "mooncake"], id="sglang-no-dtype"),
    ],
)
def test_store_client_args(engine: str, dtype: str, args: list[str]) -> None:
    client = c.store_client(Engine(engine), endpoint="m", transport="tcp", tenant="t", dtype=dtype)
    assert client.args == args


def test_store_client_vehicles() -> None:
    file = c.store_client(
        Engine.VLLM_ASCEND, endpoint="m", transport="ascend", tenant="t", dtype=""
    )
    assert file.vehicle == "file"
    assert file.env == [
        {"name": "MOONCAKE_CONFIG_PATH", "value": "/etc/gpustack/kvcache/mooncake.json"}
    ]
    assert file.volumes == [
        {
            "name": "gpustack-kvcache-config",
            "downwardAPI": {
                "items": [
                    {
                        "path": "mooncake.json",
                        "fieldRef": {
                            "fieldPath": "metadata.annotations['kvcache.gpustack.ai/client-config']"
                        },
                    }
                ]
            },
        }
    ]
    assert file.mounts == [
        {"name": "gpustack-kvcache-config", "mountPath": "/etc/gpustack/kvcache", "readOnly": True}
    ]
    assert json.loads(file.annotations["kvcache.gpustack.ai/client-config"])["protocol"] == "ascend"
    assert file.defaulted_args == []
    env = c.store_client(
        Engine.SGLANG, endpoint="m", transport="tcp", tenant="t", dtype="", kv_role="kv_producer"
    )
    assert env.vehicle == "environment"
    assert (env.volumes, env.mounts, env.annotations) == ([], [], {})
    assert env.defaulted_args == [["--enable-hierarchical-cache"]]


def test_observability_and_defaulted_env() -> None:
    assert c.observability_env() == [
        {"name": "MC_TE_METRIC", "value": "1"},
        {"name": "MC_STORE_CLIENT_METRIC_BANDWIDTH", "value": "1"},
    ]
    assert c.defaulted_env(owned.MC_FORCE_TCP_ENV) == {"name": "MC_FORCE_TCP", "value": "1"}


def test_compact_json_escapes_like_go() -> None:
    assert c.compact_json({"a": "<b>&", "c": [1, True], "d": "é\u2028"}) == (
        '{"a":"\\u003cb\\u003e\\u0026","c":[1,true],"d":"é\\u2028"}'
    )
    assert json.loads(c.compact_json({"a": "<&>"})) == {"a": "<&>"}
