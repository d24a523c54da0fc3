"""The CRDs: generated from the models, committed under deploy/crds/, never drifting."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpustack_render.cli.yamlio import dump_yaml_one, load_documents
from gpustack_render.core.naming import is_dns1123_label
from gpustack_render.schema.crd import all_crds, crd_file_name
from gpustack_render.schema.kinds import OWNED_KINDS

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


def _md() -> dict[str, Any]:
    (crd,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == "ModelDeployment"]
    return crd


def _role_schema() -> dict[str, Any]:
    root = _md()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    items: dict[str, Any] = root["properties"]["spec"]["properties"]["roles"]["items"]
    return items


def test_committed_crds_match_the_models() -> None:
    for crd in all_crds():
        path = CRDS / crd_file_name(crd)
        assert path.exists(), f"{path} missing: run make crds"
        assert path.read_text() == dump_yaml_one(crd), f"{path} drifted: run make crds"
    names = {crd_file_name(c) for c in all_crds()} | {"kustomization.yaml"}
    assert {p.name for p in CRDS.iterdir()} == names


def test_model_deployment_names_and_columns() -> None:
    crd = _md()
    names = crd["spec"]["names"]
    assert names["shortNames"] == ["md"] and names["categories"] == ["gpustack"]
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    cols = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert list(cols) == ["Engine", "Roles", "Ready", "Phase", "Endpoint", "Age"]
    # ROLES says per role what is ready of what it serves, not a bare `0S` (docs/decisions.md).
    assert cols["Roles"] == ".status.roleReadiness"
    assert cols["Ready"] == '.status.conditions[?(@.type=="Ready")].status'


def test_role_schema_bounds_defaults_and_list_maps() -> None:
    role = _role_schema()["properties"]
    assert role["replicas"]["maximum"] == 1024 and role["replicas"]["default"] == 1
    assert role["size"]["maximum"] == 64 and role["size"]["minimum"] == 1
    assert role["kind"]["enum"] == ["Server", "Prefill", "Decode", "Encode"]
    assert role["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert role["env"]["x-kubernetes-list-map-keys"] == ["name"]
    assert role["ports"]["x-kubernetes-list-map-keys"] == ["port", "protocol"]
    assert role["imagePullSecrets"]["maxItems"] == 32
    assert role["resources"]["properties"]["accelerator"]["x-kubernetes-int-or-string"] is True
    spec = _md()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["roles"]["x-kubernetes-list-type"] == "map"
    assert spec["properties"]["roles"]["x-kubernetes-list-map-keys"] == ["name"]
    assert "template" not in role


def _walk(schema: Any, path: str = "") -> list[str]:
    """Paths violating structural-schema basics: every node has a type or int-or-string/
    preserve-unknown, and no $ref/nullable-anyOf leaks from pydantic."""
    bad: list[str] = []
    if isinstance(schema, dict):
        if "$ref" in schema or "$defs" in schema:
            bad.append(path)
        if ("properties" in schema or "items" in schema) and "type" not in schema:
            bad.append(path)
        for k, v in schema.items():
            if k in ("properties",):
                for name, sub in v.items():
                    bad += _walk(sub, f"{path}.{name}")
            elif k in ("items", "additionalProperties") and isinstance(v, dict):
                bad += _walk(v, f"{path}[]")
    return bad


def test_every_crd_is_structural_and_round_trips_through_yaml() -> None:
    for crd in all_crds():
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert _walk(schema) == []
        assert load_documents(dump_yaml_one(crd)) == [crd]


def test_input_kinds_preserve_unknown_fields() -> None:
    for crd in all_crds():
        if crd["spec"]["names"]["kind"] in OWNED_KINDS:
            continue
        spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
        assert spec.get("x-kubernetes-preserve-unknown-fields") is True, crd["metadata"]["name"]


def test_the_binding_identity_is_a_dns_label_and_immutable() -> None:
    """The API server checks these on every write (tests/integration/test_binding_crd.py)."""
    (crd,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == "KVCachePoolBinding"]
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    domain = spec["properties"]["domain"]
    name = domain["properties"]["name"]
    pool = spec["properties"]["poolRef"]["properties"]["name"]
    for field in (name, pool):
        assert [v["rule"] for v in field["x-kubernetes-validations"]] == ["self == oldSelf"]
    assert [v["rule"] for v in domain["x-kubernetes-validations"]] == [
        "has(self.name) == has(oldSelf.name)"
    ]
    for sample in ("team-a-chat", "a", "Team_B", "-x", "x" * 64):
        fits = re.match(name["pattern"], sample) is not None and len(sample) <= name["maxLength"]
        assert fits == is_dns1123_label(sample), sample


def _fields_without_description(schema: dict[str, Any], path: str) -> list[str]:
    """Every property under ``schema`` (through array items and map values) that `kubectl
    explain` would show without a description."""
    missing = []
    for name, prop in (schema.get("properties") or {}).items():
        here = f"{path}.{name}"
        if not str(prop.get("description") or "").strip():
            missing.append(here)
        missing += _fields_without_description(prop, here)
    if isinstance(schema.get("items"), dict):
        missing += _fields_without_description(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        missing += _fields_without_description(schema["additionalProperties"], f"{path}{{}}")
    return missing


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_every_field_of_every_crd_has_a_description(crd: dict[str, Any]) -> None:
    """`kubectl explain <kind>.<path>` has something to say for every field, status included."""
    (version,) = crd["spec"]["versions"]
    root = version["schema"]["openAPIV3Schema"]
    assert root.get("description"), "the kind itself"
    kind = crd["spec"]["names"]["kind"]
    # `metadata` may carry nothing but its type (the API server refuses more, a description
    # included, and explains it with ObjectMeta's own).
    assert root["properties"]["metadata"] == {"type": "object"}
    assert _fields_without_description(root, kind) == [f"{kind}.metadata"]


def test_the_description_check_finds_a_field_without_one() -> None:
    schema = {
        "properties": {
            "spec": {
                "description": "d",
                "properties": {"roles": {"description": "d", "items": {"properties": {"x": {}}}}},
            }
        }
    }
    assert _fields_without_description(schema, "K") == ["K.spec.roles[].x"]


@pytest.mark.parametrize("crd", all_crds(), ids=lambda c: c["spec"]["names"]["kind"])
def test_every_kind_has_printer_columns_and_a_short_name(crd: dict[str, Any]) -> None:
    names = crd["spec"]["names"]
    assert names.get("shortNames"), names["kind"]
    (version,) = crd["spec"]["versions"]
    columns = version.get("additionalPrinterColumns") or []
    assert columns and columns[-1]["name"] == "Age"
    root = version["schema"]["openAPIV3Schema"]
    for column in columns:
        # Each column reads a field the schema declares (its first path segments).
        head = column["jsonPath"].lstrip(".").split("[")[0].split(".")
        node = root
        for part in head:
            if part == "metadata":
                break
            node = node["properties"][part]


def test_short_names_are_unique() -> None:
    short = [s for c in all_crds() for s in c["spec"]["names"].get("shortNames", [])]
    assert len(short) == len(set(short))


def test_the_scaler_is_a_scale_target_that_checks_its_bounds() -> None:
    """The HPA and KEDA need the scale subresource with a selector path; the API server runs
    the CEL rules on every write, /scale included (tests/integration/test_scaler_crd.py)."""
    (crd,) = [c for c in all_crds() if c["spec"]["names"]["kind"] == "ModelDeploymentScaler"]
    assert crd["spec"]["names"]["shortNames"] == ["mdscaler"]
    assert crd["spec"]["scope"] == "Namespaced"
    version = crd["spec"]["versions"][0]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    root = version["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    assert spec["required"] == ["replicas", "modelDeployment"]
    rules = spec["x-kubernetes-validations"]
    bounds = [r for r in rules if r.get("optionalOldSelf")]
    # Above the maximum, below the minimum, zero below a minimum above zero; each lets a write
    # that leaves the count unchanged through.
    assert len(bounds) == 3
    assert all(
        r["fieldPath"] == ".replicas" and "oldSelf.value().replicas" in r["rule"] for r in bounds
    )
    assert root["properties"]["status"]["properties"]["selector"]["type"] == "string"
    assert "x-kubernetes-preserve-unknown-fields" not in spec
