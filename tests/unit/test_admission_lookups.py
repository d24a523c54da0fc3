"""Rules that read other objects: InstanceType rules (docs/contract/admission.md §9, D20), fabric
interfaces (§10.1), the pool transport of a new binding (§10.2), and failed reads."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import (
    CPU,
    cache_chain,
    causes,
    deployment,
    instance_type,
    pd,
    review,
    role,
)

from gpustack_render.api.inputs import InputObject, InstanceType
from gpustack_render.schema.decoding import decode_deployment

INV, FORB, NF, INT = (
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueNotFound",
    "InternalError",
)
CACHE: dict[str, Any] = {"kvCache": {"poolRef": {"name": "team-a-dram"}}}
LLMD = {"name": "llm-d-router"}
ASCEND = "ascend-8x"
ACC = "spec.roles[0].resources.accelerator"


def _objects(*extra: InputObject, gpu: InstanceType | None = None) -> list[InputObject]:
    return [gpu or instance_type(), instance_type(CPU, acceleratable=False, capacity=None), *extra]


TYPE_CASES = [
    pytest.param(
        deployment(role(instanceType="gone", resources={"accelerator": 1})),
        None,
        [("instance-type.must-exist", "spec.roles[0].instanceType", NF)],
        id="instance-type.must-exist-not-found",
    ),
    pytest.param(
        deployment(role(instanceType=CPU, resources={"accelerator": 2})),
        None,
        [("instance-type.not-acceleratable", ACC, INV)],
        id="instance-type.not-acceleratable-cards-on-cpu-type",
    ),
    pytest.param(
        deployment(role(instanceType=CPU, resources={"accelerator": 0})),
        None,
        [],
        id="instance-type.not-acceleratable-zero",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorPartitionedProfile": "3g.40gb"})),
        instance_type(profiles=[]),
        [
            (
                "instance-type.not-partitionable",
                "spec.roles[0].resources.acceleratorPartitionedProfile",
                FORB,
            )
        ],
        id="instance-type.not-partitionable-not-partitionable",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorPartitionedProfile": "3g.40gb"})),
        instance_type(profiles=["1g.10gb", "2g.20gb"]),
        [
            (
                "instance-type.profile-not-offered",
                "spec.roles[0].resources.acceleratorPartitionedProfile",
                INV,
            )
        ],
        id="instance-type.profile-not-offered-profile-not-offered",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorPartitionedProfile": "3g.40gb"})),
        instance_type(profiles=["3g.40gb"]),
        [],
        id="instance-type.profile-not-offered-profile-offered",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorSlicedMemoryPercentage": 50})),
        instance_type(logical=0, profiles=["3g.40gb"]),
        [
            (
                "instance-type.not-sliceable",
                "spec.roles[0].resources.acceleratorSlicedMemoryPercentage",
                FORB,
            )
        ],
        id="instance-type.not-sliceable-not-sliceable",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorSlicedCoresPercentage": 25})),
        instance_type(logical=4),
        [],
        id="instance-type.not-sliceable-sliceable",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 2, "acceleratorSlicedMemoryPercentage": 50})),
        instance_type(logical=4),
        [("instance-type.fraction-takes-one-card", ACC, INV)],
        id="instance-type.fraction-takes-one-card-slice-needs-one-card",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 0, "acceleratorPartitionedProfile": "a"})),
        instance_type(profiles=["a"]),
        [("instance-type.fraction-takes-one-card", ACC, INV)],
        id="instance-type.fraction-takes-one-card-partition-zero-cards",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 9})),
        None,
        [("instance-type.cards-over-capacity", ACC, INV)],
        id="instance-type.cards-over-capacity-over",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 8})),
        None,
        [],
        id="instance-type.cards-over-capacity-at-capacity",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 64})),
        instance_type(manufacturer=None),
        [],
        id="D20-detail-not-ready",
    ),
    pytest.param(
        deployment(role(resources={"accelerator": 64})),
        instance_type(capacity=None),
        [],
        id="D20-no-capacity",
    ),
    pytest.param(
        deployment(role(resources={"acceleratorSlicedMemoryPercentage": 50})),
        None,
        [],
        id="D20-no-slicing-detail",
    ),
    pytest.param(
        deployment(role("a", resources={"accelerator": 0}), role("b")),
        None,
        [("instance-type.zero-cards-on-shared-type", ACC, INV)],
        id="instance-type.zero-cards-on-shared-type-zero-on-shared-type",
    ),
    pytest.param(
        deployment(role("a", resources={"accelerator": 0})),
        None,
        [],
        id="instance-type.zero-cards-on-shared-type-zero-alone",
    ),
    pytest.param(
        deployment(
            role("a", instanceType=CPU, resources={"accelerator": 0}),
            role("b", instanceType=CPU),
        ),
        None,
        [],
        id="instance-type.zero-cards-on-shared-type-zero-on-cpu-type",
    ),
    pytest.param(
        pd(
            roles=[
                role("p", kind="Prefill", resources={"acceleratorSlicedMemoryPercentage": 50}),
                role("d", kind="Decode", resources={"acceleratorSlicedCoresPercentage": 50}),
            ]
        ),
        instance_type(logical=4, group="g1"),
        [("instance-type.prefill-decode-share-slice", "spec.roles", INV)],
        id="instance-type.prefill-decode-share-slice-slices-in-one-group",
    ),
    pytest.param(
        pd(
            roles=[
                role("p", kind="Prefill", resources={"acceleratorPartitionedProfile": "a"}),
                role("d", kind="Decode", resources={"acceleratorPartitionedProfile": "a"}),
            ]
        ),
        instance_type(profiles=["a"], group="g1"),
        [],
        id="instance-type.prefill-decode-share-slice-partitions-isolated",
    ),
]


@pytest.mark.parametrize(("obj", "gpu", "expected"), TYPE_CASES)
def test_instance_type_rules(
    obj: dict[str, Any], gpu: Any, expected: list[tuple[str, str, str]]
) -> None:
    assert causes(review(obj, _objects(gpu=gpu))) == expected


def test_failed_type_read_is_internal_once() -> None:
    obj = pd(
        router=LLMD,
        roles=[
            role(
                "p",
                kind="Prefill",
                instanceType="flaky",
                resources={"accelerator": 1},
                ports=[{"port": 5557}],
            ),
            role(
                "d",
                kind="Decode",
                instanceType="flaky",
                resources={"accelerator": 1},
                ports=[{"port": 5557}],
            ),
        ],
    )
    verdict = review(obj, _objects(), failing={("InstanceType", "", "flaky")})
    assert causes(verdict) == [("ports.reserved-port-declared", "spec.roles[0].instanceType", INT)]
    assert verdict.status_code() == 500
    plain = deployment(role(instanceType="flaky", resources={"accelerator": 1}))
    verdict = review(plain, _objects(), failing={("InstanceType", "", "flaky")})
    assert causes(verdict) == [("instance-type.must-exist", "spec.roles[0].instanceType", INT)]


def _iface(**fields: Any) -> dict[str, Any]:
    resources = {"accelerator": 1, "interface": fields.pop("interface", 1)}
    return role(resources=resources, **fields)


IFACE = "spec.roles[0].resources.interface"

INTERFACE_CASES = [
    pytest.param(
        deployment(_iface()),
        [],
        [("interface.no-fabric-path", IFACE, INV)],
        id="interface.no-fabric-path-no-fabric-path",
    ),
    pytest.param(
        deployment(_iface(), **CACHE), cache_chain(backend_protocol="RDMA"), [], id="rdma"
    ),
    pytest.param(deployment(_iface(), **CACHE), cache_chain(backend_protocol="EFA"), [], id="efa"),
    pytest.param(
        deployment(_iface(), **CACHE),
        cache_chain(),
        [("interface.no-fabric-path", IFACE, INV)],
        id="interface.no-fabric-path-tcp-backend",
    ),
    pytest.param(
        deployment(_iface(), **CACHE),
        cache_chain("RDMA", "TCP"),
        [("interface.no-fabric-path", IFACE, INV)],
        id="interface.no-fabric-path-mixed-groups",
    ),
    pytest.param(
        deployment(_iface(), **CACHE),
        cache_chain("RDMA", "", backend_protocol="RDMA"),
        [],
        id="interface.no-fabric-path-groups-agree",
    ),
    pytest.param(
        pd(
            roles=[_iface(name="prefill", kind="Prefill"), _iface(name="decode", kind="Decode")],
            router=LLMD,
            kvTransfer={"protocol": "RDMA"},
        ),
        [],
        [],
        id="interface.no-fabric-path-rdma-leg",
    ),
    pytest.param(
        pd(
            roles=[_iface(name="prefill", kind="Prefill"), _iface(name="decode", kind="Decode")],
            router=LLMD,
            kvTransfer={"protocol": "EFA"},
            **CACHE,
        ),
        cache_chain(backend_protocol="RDMA"),
        [
            ("interface.no-fabric-path", IFACE, INV),
            ("interface.no-fabric-path", "spec.roles[1].resources.interface", INV),
        ],
        id="interface.no-fabric-path-rdma-and-efa",
    ),
    pytest.param(
        deployment(_iface(command=["vllm", "serve", "m"]), **CACHE),
        cache_chain(backend_protocol="RDMA"),
        [("interface.no-fabric-path", IFACE, INV)],
        id="interface.no-fabric-path-take-over-has-no-managed-path",
    ),
    pytest.param(
        deployment(_iface(), kvCache={"poolRef": {"name": "missing"}}),
        cache_chain(backend_protocol="RDMA"),
        [("interface.no-fabric-path", IFACE, FORB)],
        id="interface.no-fabric-path-binding-unresolved",
    ),
    pytest.param(
        deployment(_iface(interface=0), **CACHE),
        cache_chain(),
        [],
        id="interface.no-fabric-path-zero-interface",
    ),
]


@pytest.mark.parametrize(("obj", "extra", "expected"), INTERFACE_CASES)
def test_interfaces(
    obj: dict[str, Any], extra: list[InputObject], expected: list[tuple[str, str, str]]
) -> None:
    assert causes(review(obj, _objects(*extra))) == expected


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    md, _ = decode_deployment(obj)
    assert md is not None
    return md.to_dict()


def test_interfaces_rejudged_only_on_moves() -> None:
    old = deployment(_iface(), **CACHE)
    objects = _objects(*cache_chain())
    scaled = copy.deepcopy(old)
    scaled["spec"]["roles"][0]["replicas"] = 3
    assert review(scaled, objects, old=_stored(old)).allowed
    moved = copy.deepcopy(old)
    moved["spec"]["roles"][0]["resources"]["interface"] = 2
    assert causes(review(moved, objects, old=_stored(old))) == [
        ("interface.no-fabric-path", IFACE, INV)
    ]
    took_over = copy.deepcopy(old)
    took_over["spec"]["roles"][0]["command"] = ["vllm", "serve", "m"]
    assert causes(review(took_over, objects, old=_stored(old))) == [
        ("interface.no-fabric-path", IFACE, INV)
    ]


def test_interfaces_rejudged_when_router_changes_the_leg() -> None:
    roles = [_iface(name="prefill", kind="Prefill"), _iface(name="decode", kind="Decode")]
    old = pd(roles=roles, router=LLMD, kvTransfer={"protocol": "RDMA"})
    objects = _objects()
    assert review(old, objects).allowed
    no_router = copy.deepcopy(old)
    del no_router["spec"]["router"]
    assert [c[0] for c in causes(review(no_router, objects, old=_stored(old)))] == [
        "interface.no-fabric-path",
        "interface.no-fabric-path",
    ]


def test_interface_lookup_failure_is_internal() -> None:
    obj = deployment(_iface(), **CACHE)
    verdict = review(
        obj,
        _objects(*cache_chain()),
        failing={("KVCachePoolBinding", "team-a", "team-a-dram")},
    )
    assert causes(verdict) == [("interface.no-fabric-path", IFACE, INT)]
    assert verdict.status_code() == 500


POOL = "spec.kvCache.poolRef.name"

TRANSPORT_CASES = [
    pytest.param(
        deployment(**CACHE),
        cache_chain("RDMA", "TCP"),
        [("kv-cache.transport-unusable", POOL, FORB)],
        id="mixed",
    ),
    pytest.param(
        deployment(**CACHE), cache_chain("TCP", "", backend_protocol="Auto"), [], id="one"
    ),
    pytest.param(
        deployment(role(instanceType=ASCEND), **CACHE),
        cache_chain(),
        [("kv-cache.transport-unusable", POOL, FORB)],
        id="kv-cache.transport-unusable-ascend-needs-cann",
    ),
    pytest.param(
        deployment(role(instanceType=ASCEND), **CACHE),
        cache_chain("TCP", "CANN"),
        [],
        id="kv-cache.transport-unusable-ascend-mixed-with-cann",
    ),
    pytest.param(
        deployment(role("a", instanceType=ASCEND), role("b"), **CACHE),
        cache_chain("TCP", "CANN"),
        [("kv-cache.transport-unusable", POOL, FORB)],
        id="kv-cache.transport-unusable-each-engine-judged",
    ),
    pytest.param(
        deployment(role(instanceType=ASCEND), engine="SGLang", **CACHE),
        cache_chain(),
        [],
        id="kv-cache.transport-unusable-sglang-on-ascend",
    ),
    pytest.param(
        deployment(role(command=["vllm", "serve", "m"]), **CACHE),
        cache_chain("RDMA", "TCP"),
        [],
        id="kv-cache.transport-unusable-take-over-only",
    ),
    pytest.param(
        deployment(kvCache={"poolRef": {"name": "missing"}}),
        cache_chain("RDMA", "TCP"),
        [],
        id="kv-cache.transport-unusable-unresolved-skips",
    ),
]


@pytest.mark.parametrize(("obj", "extra", "expected"), TRANSPORT_CASES)
def test_pool_transport(
    obj: dict[str, Any], extra: list[InputObject], expected: list[tuple[str, str, str]]
) -> None:
    objects = _objects(instance_type(ASCEND, manufacturer="ascend"), *extra)
    assert causes(review(obj, objects)) == expected


def test_pool_transport_unchanged_binding_stays_editable() -> None:
    old = deployment(role(resources={"accelerator": 1}), **CACHE)
    new = copy.deepcopy(old)
    new["spec"]["roles"][0]["replicas"] = 2
    objects = _objects(*cache_chain("RDMA", "TCP"))
    assert review(new, objects, old=_stored(old)).allowed


def test_pool_transport_lookup_failure_is_internal() -> None:
    verdict = review(
        deployment(**CACHE),
        _objects(*cache_chain()),
        failing={("KVCachePool", "", "dram-pool")},
    )
    assert causes(verdict) == [("kv-cache.transport-unusable", POOL, INT)]


def test_ascend_driver_mount_on_direct_leg() -> None:
    volume = {
        "mountPath": "/usr/local/Ascend/driver",
        "hostPath": {"path": "/usr/local/Ascend/driver"},
    }
    obj = pd(
        router=LLMD,
        roles=[
            role("prefill", kind="Prefill", instanceType=ASCEND, additionalVolumes=[volume]),
            role("decode", kind="Decode", instanceType=ASCEND),
        ],
    )
    objects = _objects(instance_type(ASCEND, manufacturer="ascend"))
    assert causes(review(obj, objects)) == [
        ("volumes.operator-mount-path", "spec.roles[0].additionalVolumes[0].mountPath", INV)
    ]
    obj["spec"]["engine"]["name"] = "SGLang"
    assert review(obj, objects).allowed


def test_ascend_roles_reserve_only_the_bootstrap_port() -> None:
    obj = pd(
        router=LLMD,
        roles=[
            role("prefill", kind="Prefill", instanceType=ASCEND, ports=[{"port": 5557}]),
            role("decode", kind="Decode", instanceType=ASCEND, ports=[{"port": 5557}]),
        ],
    )
    objects = _objects(instance_type(ASCEND, manufacturer="ascend"))
    assert review(obj, objects).allowed
