"""Resources derived from the InstanceType (docs/contract/render.md §15 worked examples, D12, D20,
D21)."""

from __future__ import annotations

from typing import Any

import pytest
from property.strategies import (
    Case,
    backend,
    binding,
    deployment,
    instance_type,
    pool,
    render_case,
    role,
)

from gpustack_render.api.inputs import InstanceType
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core.errors import RenderError
from gpustack_render.rendering.resources import (
    EFA_KEY,
    RDMA_KEY,
    RDMA_SHARED_KEY,
    fabric_key,
    instance_type_hash_input,
    size_pod,
)

PROFILES = [{"name": "3g.40gb", "memoryMiB": 40960, "count": 2}, {"name": "1g.10gb"}]


def _it(**kw: Any) -> InstanceType:
    base: dict[str, Any] = {"cpu": "16", "ram": "64Gi", "memory": "80Gi"}
    return InstanceType.model_validate(instance_type("t", **{**base, **kw}))


def _role(**resources: Any) -> RoleSpec:
    return RoleSpec.model_validate(
        {"name": "server", "instanceType": "t", "resources": resources or None}
    )


@pytest.mark.parametrize(
    ("resources", "it", "limits", "annotations"),
    [
        pytest.param(
            {"accelerator": 4},
            {},
            {"cpu": "64", "memory": "256Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "4"},
            {},
            id="four-cards",
        ),
        pytest.param(
            {},
            {},
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi"},
            {},
            id="accelerator-unset-no-key",
        ),
        pytest.param(
            {"accelerator": 0},
            {},
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi"},
            {},
            id="explicit-zero-no-key",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorSlicedMemoryPercentage": 50},
            {"logical_count": 4},
            {
                "cpu": "8",
                "memory": "32Gi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu.sliced": "1",
            },
            {
                "devices.gpustack.ai/sliced-memory-percentage": "50",
                "devices.gpustack.ai/sliced-cores-percentage": "50",
            },
            id="memory-slice-50",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorSlicedCoresPercentage": 25},
            {"logical_count": 4},
            {
                "cpu": "4",
                "memory": "16Gi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu.sliced": "1",
            },
            {
                "devices.gpustack.ai/sliced-memory-percentage": "25",
                "devices.gpustack.ai/sliced-cores-percentage": "25",
            },
            id="cores-slice-25",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorPartitionedProfile": "3g.40gb"},
            {"profiles": PROFILES},
            {
                "cpu": "8",
                "memory": "32Gi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu.partitioned": "1",
            },
            {"devices.gpustack.ai/partitioned-profile": "3g.40gb"},
            id="partition-3g40gb",
        ),
        pytest.param(
            {"accelerator": 1},
            {"local_storage": "512Gi"},
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "15Gi", "nvidia.com/gpu": "1"},
            {},
            id="local-storage-512Gi",
        ),
        pytest.param(
            {"accelerator": 1},
            {"local_storage": "8Gi"},
            {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "8Gi", "nvidia.com/gpu": "1"},
            {},
            id="local-storage-8Gi-caps",
        ),
        pytest.param(
            {"accelerator": 2},
            {"ephemeral_storage": "20Gi"},
            {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "40Gi", "nvidia.com/gpu": "2"},
            {},
            id="unit-ephemeral-scaled",
        ),
        pytest.param(
            {"accelerator": 3},
            {"cpu": "2500m", "ram": "3000Mi"},
            {
                "cpu": "7500m",
                "memory": "9000Mi",
                "ephemeral-storage": "15Gi",
                "nvidia.com/gpu": "3",
            },
            {},
            id="millicores-and-mebibytes",
        ),
        pytest.param(
            {"accelerator": 2},
            {"manufacturer": "ascend"},
            {"cpu": "32", "memory": "128Gi", "ephemeral-storage": "15Gi", "huawei.com/npu": "2"},
            {},
            id="ascend-key",
        ),
    ],
)
def test_sizing(
    resources: dict[str, Any],
    it: dict[str, Any],
    limits: dict[str, str],
    annotations: dict[str, str],
) -> None:
    out = size_pod(_role(**resources), _it(**it), index=0)
    assert out.limits == limits
    assert out.annotations == annotations
    assert out.to_json() == {"limits": limits, "requests": limits}


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param(
            {"accelerator": 2, "acceleratorSlicedMemoryPercentage": 50}, id="slice-two-cards"
        ),
        pytest.param(
            {"accelerator": 2, "acceleratorPartitionedProfile": "3g.40gb"},
            id="partition-two-cards",
        ),
    ],
)
def test_slice_or_partition_counts_one_card_for_ephemeral_storage(
    resources: dict[str, Any],
) -> None:
    """Ephemeral storage is the unit value × cards, a slice or partition counting 1
    (D21, docs/decisions.md), whatever ``accelerator`` a stored object carries."""
    it = _it(ephemeral_storage="20Gi", logical_count=4, profiles=PROFILES)
    out = size_pod(_role(**resources), it, index=0)
    assert out.limits["ephemeral-storage"] == "20Gi"
    assert out.cards == 1


def test_non_acceleratable_type_uses_one_unit() -> None:
    it = InstanceType.model_validate(
        instance_type("cpu", acceleratable=False, cpu="30", ram="60Gi", local_storage="10Gi")
    )
    out = size_pod(_role(acceleratorSlicedMemoryPercentage=50), it, index=0)
    assert out.limits == {"cpu": "30", "memory": "60Gi", "ephemeral-storage": "10Gi"}
    assert out.accelerator_key is None


def test_fabric_interfaces_are_appended() -> None:
    out = size_pod(_role(accelerator=1), _it(), index=0, fabric=(RDMA_KEY, 2))
    assert list(out.limits)[-1] == RDMA_KEY and out.limits[RDMA_KEY] == "2"


@pytest.mark.parametrize(
    ("protocol", "count", "key"),
    [("rdma", 1, RDMA_SHARED_KEY), ("rdma", 2, RDMA_KEY), ("efa", 1, EFA_KEY), ("efa", 4, EFA_KEY)],
)
def test_fabric_key(protocol: str, count: int, key: str) -> None:
    assert fabric_key(protocol, count) == key


@pytest.mark.parametrize(
    ("resources", "it", "origin"),
    [
        pytest.param(
            {"accelerator": 1},
            {"manufacturer": None},
            "render.instance-type-not-ready",
            id="no-manufacturer",
        ),
        pytest.param(
            {"accelerator": 1},
            {"capacity": None},
            "render.instance-type-not-ready",
            id="no-capacity",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorSlicedMemoryPercentage": 10},
            {},
            "render.instance-type-not-ready",
            id="slice-detail-missing",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorSlicedMemoryPercentage": 10},
            {"logical_count": 0},
            "render.slice-not-offered",
            id="slice-not-offered",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorPartitionedProfile": "3g.40gb"},
            {},
            "render.instance-type-not-ready",
            id="partition-detail-missing",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorPartitionedProfile": "7g.80gb"},
            {"profiles": PROFILES},
            "render.partition-unsizable",
            id="profile-unknown",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorPartitionedProfile": "1g.10gb"},
            {"profiles": PROFILES},
            "render.partition-unsizable",
            id="profile-without-memory",
        ),
        pytest.param(
            {"accelerator": 1, "acceleratorPartitionedProfile": "3g.40gb"},
            {"profiles": PROFILES, "memory": None},
            "render.partition-unsizable",
            id="no-card-memory",
        ),
        pytest.param(
            {"accelerator": 1},
            {"manufacturer": "acme"},
            "render.manufacturer-unknown",
            id="unknown-manufacturer",
        ),
        pytest.param(
            {"accelerator": 1}, {"cpu": "lots"}, "render.unit-resources", id="bad-unit-cpu"
        ),
        pytest.param(
            {"accelerator": "1.5"}, {}, "render.accelerator-invalid", id="fractional-cards"
        ),
    ],
)
def test_render_errors(resources: dict[str, Any], it: dict[str, Any], origin: str) -> None:
    with pytest.raises(RenderError) as info:
        size_pod(_role(**resources), _it(**it), index=2)
    assert info.value.origin == origin
    assert "role 'server'" in str(info.value)
    assert info.value.field.startswith("spec.roles[2]")


def test_instance_type_hash_input_is_canonical() -> None:
    it = _it(cpu="16000m", ram="65536Mi", local_storage="1024Gi")
    assert instance_type_hash_input(it) == {
        "entrance": "gpustack-fnv64-00000000000000a1",
        "manufacturer": "nvidia",
        "acceleratable": True,
        "unitResources": {"cpu": "16", "ram": "64Gi", "ephemeralStorage": None},
        "localStorage": "1Ti",
    }


@pytest.mark.parametrize(
    ("inputs", "names"),
    [
        pytest.param([], "KVCachePoolBinding 'team-a-cache' does not exist", id="binding-gone"),
        pytest.param(
            [binding()], "KVCachePool 'dram-pool' named by the Binding does not exist", id="pool"
        ),
        pytest.param(
            [binding(), pool()],
            "KVCacheBackend 'dram-backend' named by KVCachePool 'dram-pool' does not exist",
            id="backend",
        ),
    ],
)
def test_interface_with_an_unreadable_pool_names_what_is_missing(
    inputs: list[dict[str, Any]], names: str
) -> None:
    """A stored deployment whose cache chain lost an object cannot pick its fabric key: the render
    error says which object is missing, not only that no RDMA/EFA path exists."""
    case = Case(
        deployment([role(resources={"accelerator": 1, "interface": 1})], pool_ref="team-a-cache"),
        [instance_type(), *inputs],
    )
    with pytest.raises(RenderError) as info:
        render_case(case)
    assert info.value.origin == "render.interface-no-path"
    assert info.value.field == "spec.roles[0].resources.interface"
    assert names in str(info.value)


def test_interface_key_follows_the_pool_while_the_binding_is_not_ready() -> None:
    case = Case(
        deployment([role(resources={"accelerator": 1, "interface": 1})], pool_ref="team-a-cache"),
        [instance_type(), binding(phase="Provisioning"), pool(), backend(protocol="RDMA")],
    )
    limits = render_case(case).roles[0].seats[0].pod["spec"]["containers"][0]["resources"]
    assert limits["limits"][RDMA_SHARED_KEY] == "1"
