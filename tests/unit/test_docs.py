"""docs/api.md is generated from the models; it must not drift."""

from __future__ import annotations

from pathlib import Path

from gpustack_render.api import ModelDeployment
from gpustack_render.reconcile.readinessdoc import readiness_reference
from gpustack_render.schema.apidoc import api_reference, field_rows

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def test_committed_api_reference_matches_the_models() -> None:
    expected = api_reference({"ModelDeployment": readiness_reference()})
    assert DOC.read_text() == expected, "docs/api.md drifted: run make docs"


def test_every_spec_field_has_a_mutability_and_description() -> None:
    rows = [r for r in field_rows(ModelDeployment) if r[0].startswith("`spec.")]
    assert len(rows) > 60
    missing = [r[0] for r in rows if not r[5]]
    assert missing == ["`spec.engine`"], missing  # its two children carry their own
    undocumented = [r[0] for r in rows if not r[6] and not r[0].endswith(".name`")]
    assert undocumented == []


def test_mutability_follows_d3() -> None:
    by_path = {r[0]: r[5] for r in field_rows(ModelDeployment)}
    assert by_path["`spec.model.name`"] == "frozen"
    assert by_path["`spec.engine.name`"] == "frozen"
    assert by_path["`spec.engine.image`"] == "rolls"
    assert by_path["`spec.kvCache.poolRef.name`"] == "frozen"
    assert by_path["`spec.router.name`"] == "frozen"
    assert by_path["`spec.router.replicas`"] == "free"
    assert by_path["`spec.roles[].name`"] == "frozen"
    assert by_path["`spec.roles[].kind`"] == "frozen"
    assert by_path["`spec.roles[].replicas`"] == "free"
    assert by_path["`spec.roles[].size`"] == "rolls"
    assert by_path["`spec.roles[].env[].value`"] == "rolls"
    assert by_path["`spec.kvTransfer.protocol`"] == "rolls"
