"""The mutating accelerator default (docs/contract/admission.md §3) and its JSON Patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from admission_support import CPU, causes, deployment, lookups_of, review, role

from gpustack_render.admission import mutate_deployment
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.defaulting import default_accelerators, default_deployment
from gpustack_render.schema.decoding import decode_deployment


def _accelerators(data: dict[str, Any]) -> list[Any]:
    return [(r.get("resources") or {}).get("accelerator") for r in data["spec"]["roles"]]


@pytest.mark.parametrize(
    ("roles", "expected"),
    [
        pytest.param([role()], ["1"], id="acceleratable-unset"),
        pytest.param([role(resources={"accelerator": 0})], [0], id="explicit-zero-kept"),
        pytest.param([role(resources={"accelerator": "4"})], ["4"], id="stated-kept"),
        pytest.param([role(resources={"interface": 1})], ["1"], id="resources-without-accelerator"),
        pytest.param([role(instanceType=CPU)], [None], id="not-acceleratable"),
        pytest.param(
            [role("a"), role("b", instanceType=CPU), role("c", resources={"accelerator": 2})],
            ["1", None, 2],
            id="per-role",
        ),
    ],
)
def test_default_accelerators(roles: list[dict[str, Any]], expected: list[Any]) -> None:
    data = deployment(*roles)
    before = copy.deepcopy(data)
    out, errs = default_accelerators(data, lookups=lookups_of())
    assert not errs
    assert _accelerators(out) == expected
    assert data == before, "the input is never modified"


def test_interface_kept_beside_default() -> None:
    out, _ = default_accelerators(
        deployment(role(resources={"interface": 1})), lookups=lookups_of()
    )
    assert out["spec"]["roles"][0]["resources"] == {"interface": 1, "accelerator": "1"}


def test_missing_and_failing_types() -> None:
    data = deployment(role("a", instanceType="nope"), role("b", instanceType="flaky"))
    out, errs = default_accelerators(
        data, lookups=lookups_of(failing={("InstanceType", "", "flaky")})
    )
    assert [(e.type.value, e.field, e.origin) for e in errs] == [
        ("FieldValueNotFound", "spec.roles[0].instanceType", "accelerator.default-type-unreadable"),
        ("InternalError", "spec.roles[1].instanceType", "accelerator.default-type-unreadable"),
    ]
    assert _accelerators(out) == [None, None]


def test_deleting_object_untouched() -> None:
    data = deployment(role(instanceType="nope"))
    data["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    out, errs = default_accelerators(data, lookups=lookups_of())
    assert not errs and out == data


def test_odd_shapes_never_raise() -> None:
    for data in ({}, {"spec": None}, {"spec": {"roles": "x"}}, {"spec": {"roles": [1, {"x": 1}]}}):
        out, errs = default_accelerators(data, lookups=lookups_of())
        assert out == data and not errs


def test_fixed_point() -> None:
    data = deployment(role("a"), role("b", instanceType=CPU), role("c", resources={}))
    once, _ = default_accelerators(data, lookups=lookups_of())
    twice, _ = default_accelerators(once, lookups=lookups_of())
    assert once == twice


def test_default_deployment_on_models() -> None:
    md, _ = decode_deployment(deployment(role()))
    assert md is not None
    out, errs = default_deployment(md, lookups=lookups_of())
    assert not errs
    assert out.spec.roles[0].resources is not None
    assert out.spec.roles[0].resources.accelerator == "1"
    again, _ = default_deployment(out, lookups=lookups_of())
    assert again is out


def test_review_patch_comes_from_make_patch() -> None:
    verdict = review(deployment(role("a"), role("b", resources={"interface": 0})))
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/roles/0/resources", "value": {"accelerator": "1"}},
        {"op": "add", "path": "/spec/roles/1/resources/accelerator", "value": "1"},
    ]


def test_review_stops_at_mutation_errors() -> None:
    verdict = review(deployment(role(instanceType="nope", command=["x"], extraArgs=["--kv"])))
    assert causes(verdict) == [
        ("accelerator.default-type-unreadable", "spec.roles[0].instanceType", "FieldValueNotFound")
    ]


def test_mutating_webhook() -> None:
    request = AdmissionRequest(operation="CREATE", object=deployment(role()), namespace="team-a")
    verdict = mutate_deployment(request, lookups=lookups_of(), settings=Settings())
    assert verdict.allowed
    assert verdict.patch == [
        {"op": "add", "path": "/spec/roles/0/resources", "value": {"accelerator": "1"}}
    ]
    request = AdmissionRequest(operation="DELETE", object=None, old_object=deployment())
    assert mutate_deployment(request, lookups=lookups_of(), settings=Settings()).allowed
    request = AdmissionRequest(operation="CREATE", object=deployment(role(instanceType="x")))
    refused = mutate_deployment(request, lookups=lookups_of(), settings=Settings())
    assert not refused.allowed and refused.status_code() == 422
