"""Every bound, default, enum and list-map key of docs/contract/api-notes.md, read back from the
generated CRDs (``gpustack-render crds``), one row each."""

from __future__ import annotations

from typing import Any

import pytest

from gpustack_render.schema.crd import all_crds

ROLE = "spec.roles[]"


def _schema(kind: str) -> dict[str, Any]:
    (crd,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == kind]
    root: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


def _at(kind: str, path: str) -> dict[str, Any]:
    node = _schema(kind)
    for part in path.split("."):
        is_list = part.endswith("[]")
        node = node["properties"][part.removesuffix("[]")]
        if is_list:
            node = node["items"]
    return node


def _list_at(kind: str, path: str) -> dict[str, Any]:
    parent, _, last = path.rpartition(".")
    node = _at(kind, parent) if parent else _schema(kind)
    return dict(node["properties"][last])


MD_ROWS = [
    # (path, key, value)
    ("spec.model.name", "minLength", 1),
    ("spec.model.name", "maxLength", 253),
    ("spec.engine.name", "enum", ["vLLM", "SGLang"]),
    ("spec.engine.image", "minLength", 1),
    ("spec.engine.image", "maxLength", 512),
    ("spec.kvCache.connector", "default", "Mooncake"),
    ("spec.kvCache.connector", "enum", ["Mooncake"]),
    ("spec.router.name", "enum", ["llm-d-router", "vllm-router", "sglang-gateway"]),
    ("spec.router.replicas", "minimum", 1),
    ("spec.router.replicas", "default", 1),
    ("spec.router.image", "maxLength", 512),
    ("spec.router.imagePullPolicy", "enum", ["Always", "IfNotPresent", "Never"]),
    ("spec.router.requestTimeoutSeconds", "minimum", 1),
    ("spec.router.disaggregationThresholdTokens", "minimum", 0),
    ("spec.kvTransfer.protocol", "enum", ["Auto", "TCP", "RDMA", "EFA", "CANN", "ROCM"]),
    (f"{ROLE}.name", "minLength", 1),
    (f"{ROLE}.name", "maxLength", 63),
    (f"{ROLE}.name", "pattern", "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"),
    (f"{ROLE}.kind", "enum", ["Server", "Prefill", "Decode", "Encode"]),
    (f"{ROLE}.kind", "default", "Server"),
    (f"{ROLE}.replicas", "minimum", 1),
    (f"{ROLE}.replicas", "maximum", 1024),
    (f"{ROLE}.replicas", "default", 1),
    (f"{ROLE}.size", "minimum", 1),
    (f"{ROLE}.size", "maximum", 64),
    (f"{ROLE}.size", "default", 1),
    (f"{ROLE}.instanceType", "minLength", 1),
    (f"{ROLE}.instanceType", "maxLength", 253),
    (f"{ROLE}.resources.acceleratorSlicedMemoryPercentage", "minimum", 0),
    (f"{ROLE}.resources.acceleratorSlicedMemoryPercentage", "maximum", 100),
    (f"{ROLE}.resources.acceleratorSlicedCoresPercentage", "minimum", 0),
    (f"{ROLE}.resources.acceleratorSlicedCoresPercentage", "maximum", 100),
    (f"{ROLE}.resources.acceleratorPartitionedProfile", "maxLength", 64),
    (f"{ROLE}.resources.accelerator", "x-kubernetes-int-or-string", True),
    (f"{ROLE}.resources.interface", "x-kubernetes-int-or-string", True),
    (f"{ROLE}.image", "maxLength", 512),
    (f"{ROLE}.imagePullPolicy", "enum", ["Always", "IfNotPresent", "Never"]),
    (f"{ROLE}.privileged", "default", False),
    (f"{ROLE}.ports[].port", "minimum", 1),
    (f"{ROLE}.ports[].port", "maximum", 65535),
    (f"{ROLE}.ports[].protocol", "enum", ["TCP", "UDP", "SCTP"]),
    (f"{ROLE}.ports[].protocol", "default", "TCP"),
    (f"{ROLE}.additionalVolumes[].mountPath", "pattern", "^(/[^/]+)+$"),
    (f"{ROLE}.additionalVolumes[].mountPath", "maxLength", 1024),
    (f"{ROLE}.additionalVolumes[].subPath", "pattern", "^[^/].*$"),
    (f"{ROLE}.additionalVolumes[].subPath", "maxLength", 1024),
    (f"{ROLE}.shmSize", "x-kubernetes-int-or-string", True),
    (f"{ROLE}.terminationGracePeriodSeconds", "minimum", 15),
    (f"{ROLE}.terminationGracePeriodSeconds", "maximum", 3600),
    (f"{ROLE}.terminationGracePeriodSeconds", "format", "int64"),
    (f"{ROLE}.startupTimeoutSeconds", "minimum", 10),
    (f"{ROLE}.startupTimeoutSeconds", "maximum", 86400),
    (f"{ROLE}.startupTimeoutSeconds", "default", 1800),
    (f"{ROLE}.elasticEp.width", "minimum", 2),
    (f"{ROLE}.elasticEp.width", "maximum", 64),
    ("status.endpoint", "maxLength", 512),
    ("status.kvCache.domain.name", "maxLength", 63),
    ("status.phase", "enum", ["Starting", "Ready", "Degraded", "Deleting"]),
]


@pytest.mark.parametrize(("path", "key", "value"), MD_ROWS, ids=[f"{p}:{k}" for p, k, _ in MD_ROWS])
def test_model_deployment_field(path: str, key: str, value: Any) -> None:
    assert _at("ModelDeployment", path).get(key) == value


LISTS = [
    # (path, list type, map keys, maxItems)
    ("spec.roles", "map", ["name"], None),
    (f"{ROLE}.env", "map", ["name"], None),
    (f"{ROLE}.ports", "map", ["port", "protocol"], None),
    (f"{ROLE}.imagePullSecrets", "atomic", None, 32),
    (f"{ROLE}.command", "atomic", None, None),
    (f"{ROLE}.extraArgs", "atomic", None, None),
    (f"{ROLE}.additionalVolumes", "atomic", None, None),
    ("spec.router.extraArgs", "atomic", None, None),
    ("spec.router.imagePullSecrets", "atomic", None, 32),
    ("status.conditions", "map", ["type"], None),
    ("status.roles", "map", ["name"], None),
]


@pytest.mark.parametrize(
    ("path", "list_type", "keys", "max_items"), LISTS, ids=[row[0] for row in LISTS]
)
def test_model_deployment_lists(
    path: str, list_type: str, keys: list[str] | None, max_items: int | None
) -> None:
    node = _list_at("ModelDeployment", path)
    assert node["type"] == "array"
    assert node["x-kubernetes-list-type"] == list_type
    assert node.get("x-kubernetes-list-map-keys") == keys
    assert node.get("maxItems") == max_items


def test_roles_need_at_least_one_entry_and_required_fields() -> None:
    spec = _at("ModelDeployment", "spec")
    assert spec["properties"]["roles"]["minItems"] == 1
    assert spec["required"] == ["model", "engine", "roles"]
    role = _at("ModelDeployment", ROLE)
    assert role["required"] == ["name", "instanceType"]
    assert _at("ModelDeployment", "spec.engine")["required"] == ["name", "image"]
    assert _at("ModelDeployment", "spec.kvCache")["required"] == ["poolRef"]
    assert "namespace" not in _at("ModelDeployment", "spec.kvCache.poolRef")["properties"]


@pytest.mark.parametrize(
    ("kind", "scope", "short"),
    [
        ("ModelDeployment", "Namespaced", ["md"]),
        ("InstanceType", "Cluster", ["instype"]),
        ("KVCachePoolBinding", "Namespaced", ["kvcpb"]),
        ("KVCachePool", "Cluster", ["kvcp"]),
        ("KVCacheBackend", "Cluster", ["kvcb"]),
        ("ModelArtifact", "Namespaced", ["mart"]),  # the project's own (docs/decisions.md)
        ("NodeModelStore", "Cluster", ["nms"]),  # written by the node plugin (docs/node-store.md)
    ],
)
def test_kinds_scope_and_short_names(kind: str, scope: str, short: list[str] | None) -> None:
    (crd,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == kind]
    assert crd["spec"]["group"] == "worker.gpustack.ai"
    assert crd["spec"]["scope"] == scope
    assert crd["spec"]["names"].get("shortNames") == short
    assert crd["spec"]["names"]["categories"] == ["gpustack"]
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1"]


def test_input_kind_fields_the_library_reads() -> None:
    assert _at("InstanceType", "spec.acceleratable")["type"] == "boolean"
    assert _at("InstanceType", "status.detail.slicedDetail.logical.count")["format"] == "int32"
    profiles = _at("InstanceType", "status.detail.slicedDetail.physical.profiles[]")
    assert set(profiles["properties"]) == {"name", "memoryMiB", "count"}
    assert _at("KVCachePoolBinding", "spec.domain.name")["maxLength"] == 63
    assert _at("KVCachePoolBinding", "spec.domain.dtype")["maxLength"] == 32
    assert _at("KVCachePoolBinding", "spec.domain")["required"] == ["blockSize", "dtype"]
    used_by = _list_at("KVCachePoolBinding", "status.usedBy")
    assert used_by["x-kubernetes-list-map-keys"] == ["kind", "namespace", "name"]
    assert _at("KVCachePool", "status.clientEndpoint")["maxLength"] == 259
    backends = _list_at("KVCachePool", "spec.backends")
    assert backends["minItems"] == 1 and backends["maxItems"] == 1
    assert _at("KVCacheBackend", "spec.transport.protocol")["enum"] == [
        "Auto",
        "TCP",
        "RDMA",
        "EFA",
        "CANN",
        "ROCM",
        "MUSA",
        "MACA",
    ]
    assert _at("KVCacheBackend", "spec.transport.protocol")["default"] == "Auto"
