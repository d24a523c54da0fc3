"""Generated names: the FNV-1a group-name vectors of docs/contract/render.md §6 and the D5 name
shapes."""

from __future__ import annotations

import pytest

from gpustack_render.core import naming


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("team-a/qwen/server/0", "gpustack-fnv64-bdf8eb21739dcea9", id="server-0"),
        pytest.param("team-a/qwen/server/1", "gpustack-fnv64-bdf8ea21739dccf6", id="server-1"),
        pytest.param("team-a/qwen/prefill/0", "gpustack-fnv64-d8143bebd0d350d8", id="prefill-0"),
        pytest.param("team-a/qwen/decode/0", "gpustack-fnv64-058a40297d4ce6a4", id="decode-0"),
        pytest.param("team-a/qwen/server", "gpustack-fnv64-25c39dbb907c785e", id="role-key"),
        pytest.param("a", "gpustack-fnv64-af63dc4c8601ec8c", id="sanity"),
    ],
)
def test_reference_vectors(key: str, expected: str) -> None:
    assert naming.fnv_name(key) == expected
    assert len(naming.fnv_name(key)) == 31


def test_group_name_is_over_namespace_deployment_role_ordinal() -> None:
    assert naming.group_name("team-a", "qwen", "server", 1) == "gpustack-fnv64-bdf8ea21739dccf6"


def test_fnv1a64_empty_input_is_the_offset_basis() -> None:
    assert naming.fnv1a64(b"") == 0xCBF29CE484222325


@pytest.mark.parametrize(
    ("function", "args", "expected"),
    [
        pytest.param(naming.generate_name, ("qwen", "server"), "qwen-server-", id="generate-name"),
        pytest.param(naming.instance_name, ("qwen", "server", 3), "qwen-server-r3", id="instance"),
        pytest.param(
            naming.member_name, ("qwen", "server", 3, 1), "qwen-server-r3-m1", id="member"
        ),
        pytest.param(
            naming.leader_address,
            ("qwen", "server", 2),
            "qwen-server-r2-m0.qwen-server-r2",
            id="leader-address",
        ),
        pytest.param(naming.deployment_service_name, ("qwen",), "qwen", id="deployment-svc"),
        pytest.param(naming.role_service_name, ("qwen", "decode"), "qwen-decode", id="role-svc"),
        pytest.param(naming.router_service_name, ("qwen",), "qwen-router", id="router-svc"),
    ],
)
def test_name_shapes(function: object, args: tuple[object, ...], expected: str) -> None:
    assert callable(function)
    assert function(*args) == expected


@pytest.mark.parametrize(
    ("name", "dns1123", "dns1035"),
    [
        pytest.param("qwen-server-r0-m0", True, True, id="member-name"),
        pytest.param("0abc", True, False, id="leading-digit"),
        pytest.param("a" * 63, True, True, id="63-chars"),
        pytest.param("a" * 64, False, False, id="64-chars"),
        pytest.param("Upper", False, False, id="uppercase"),
        pytest.param("trailing-", False, False, id="trailing-dash"),
        pytest.param("a.b", False, False, id="dot"),
    ],
)
def test_dns_labels(name: str, dns1123: bool, dns1035: bool) -> None:
    assert naming.is_dns1123_label(name) is dns1123
    assert naming.is_dns1035_label(name) is dns1035
