"""The pod-spec-hash (D4, D10) and the render-version floor (D4, D15)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.labels import MIN_RENDER_VERSION, POD_SPEC_HASH, RENDER_VERSION
from gpustack_render.rendering.hashing import (
    CURRENT_RENDER_VERSION,
    MIN_SUPPORTED_RENDER_VERSION,
    HashBindings,
    SeatHasher,
    canonical_json,
    effective_floor,
    is_outdated,
    pod_render_version,
    pod_spec_hash,
    role_hash_input,
    spec_hash_input,
)
from gpustack_render.schema.decoding import decode_deployment


def _md(**role: Any) -> ModelDeployment:
    data = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "qwen", "namespace": "team-a"},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "instanceType": "a10g", **role}],
        },
    }
    md, errs = decode_deployment(data)
    assert md is not None, errs
    return md


BINDINGS = HashBindings(instance_type={"entrance": "e", "manufacturer": "nvidia"})


def test_render_version_constants() -> None:
    assert CURRENT_RENDER_VERSION == 2  # 2: the TAS rank label on members of size > 1
    assert MIN_SUPPORTED_RENDER_VERSION == 1


def test_canonical_json_sorts_keys_without_spaces_in_utf8() -> None:
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"é","b":1}'.encode()


def test_d10_keys_are_exactly_these_and_absent_values_are_null() -> None:
    data = spec_hash_input(_md(), _md().spec.roles[0], bindings=BINDINGS)
    assert sorted(data) == sorted(
        ["model", "engine", "router", "kvCache", "kvTransfer", "role", "bindings"]
    )
    assert data["router"] is None and data["kvCache"] is None and data["kvTransfer"] is None
    assert data["model"] == {"name": "Qwen/Qwen3-8B", "artifactRef": None}
    assert data["bindings"] == {
        "instanceType": {"entrance": "e", "manufacturer": "nvidia"},
        "pool": None,
        "binding": None,
        "interfaceKey": None,
        "runtimeClassName": None,
    }
    assert "replicas" not in data["role"]
    assert data["role"]["shmSize"] is None


def test_role_quantities_are_canonical() -> None:
    role = _md(resources={"accelerator": 2, "interface": "1"}, shmSize="32768Mi").spec.roles[0]
    data = role_hash_input(role)
    assert data["resources"]["accelerator"] == "2"
    assert data["resources"]["interface"] == "1"
    assert data["shmSize"] == "32Gi"


def test_take_over_extra_args_are_inert() -> None:
    role = _md(command=["/serve"], extraArgs=["--x"]).spec.roles[0]
    assert role_hash_input(role)["extraArgs"] is None
    managed = _md(extraArgs=["--x"]).spec.roles[0]
    assert role_hash_input(managed)["extraArgs"] == ["--x"]


def test_peer_leg_is_present_only_when_set() -> None:
    assert "peerLeg" not in BINDINGS.to_json()
    assert HashBindings(instance_type=None, peer_leg="{}").to_json()["peerLeg"] == "{}"


@pytest.mark.parametrize(("ordinal", "member"), [(0, 0), (0, 5), (17, 3), (1023, 63)])
def test_seat_hasher_matches_the_reference_computation(ordinal: int, member: int) -> None:
    md = _md(size=64, replicas=1024)
    role = md.spec.roles[0]
    hasher = SeatHasher(spec_hash_input(md, role, bindings=BINDINGS))
    expected = pod_spec_hash(md, role, bindings=BINDINGS, ordinal=ordinal, member=member)
    assert hasher.hash(ordinal, member) == expected
    data = spec_hash_input(md, role, bindings=BINDINGS)
    data["seat"] = {"ordinal": ordinal, "member": member}
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert expected == hashlib.sha256(text.encode()).hexdigest()


def test_seat_hasher_falls_back_for_keys_after_seat() -> None:
    hasher = SeatHasher({"zzz": 1, "a": 2})
    data = {"zzz": 1, "a": 2, "seat": {"ordinal": 1, "member": 2}}
    assert hasher.hash(1, 2) == hashlib.sha256(canonical_json(data)).hexdigest()
    with pytest.raises(ValueError):
        SeatHasher({"seat": 1})


@pytest.mark.parametrize(
    ("annotation", "floor"),
    [
        pytest.param(None, 1, id="absent"),
        pytest.param("1", 1, id="one"),
        pytest.param("7", 2, id="clamped-to-current"),
        pytest.param("0", 1, id="zero-is-unparsable"),
        pytest.param("-2", 1, id="negative"),
        pytest.param("two", 1, id="not-a-number"),
        pytest.param(" 1 ", 1, id="trimmed"),
        pytest.param("9" * 5000, 1, id="too-many-digits-to-read"),
    ],
)
def test_effective_floor(annotation: str | None, floor: int) -> None:
    annotations = {} if annotation is None else {MIN_RENDER_VERSION: annotation}
    assert effective_floor(annotations) == floor


def test_effective_floor_clamps_into_the_supported_range() -> None:
    ann = {MIN_RENDER_VERSION: "3"}
    assert effective_floor(ann, minimum=2, current=5) == 3
    assert effective_floor(ann, minimum=4, current=5) == 4
    assert effective_floor(ann, minimum=1, current=2) == 2


@pytest.mark.parametrize(
    ("annotations", "seat_hash", "floor", "outdated"),
    [
        pytest.param({POD_SPEC_HASH: "h", RENDER_VERSION: "1"}, "h", 1, False, id="current"),
        pytest.param({POD_SPEC_HASH: "x", RENDER_VERSION: "1"}, "h", 1, True, id="hash-moved"),
        pytest.param({POD_SPEC_HASH: "h"}, "h", 1, True, id="no-render-version-reads-0"),
        pytest.param({POD_SPEC_HASH: "h", RENDER_VERSION: "2"}, "h", 3, True, id="below-floor"),
        pytest.param({POD_SPEC_HASH: "h", RENDER_VERSION: "2"}, "h", 2, False, id="at-floor"),
    ],
)
def test_is_outdated(
    annotations: dict[str, str], seat_hash: str, floor: int, outdated: bool
) -> None:
    assert is_outdated(annotations, seat_hash=seat_hash, floor=floor) is outdated


def test_pod_render_version() -> None:
    assert pod_render_version({RENDER_VERSION: "4"}) == 4
    assert pod_render_version({}) == 0
    assert pod_render_version(None) == 0
