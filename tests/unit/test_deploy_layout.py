"""deploy/: the top-level kustomization composes every part, and every part lists real files.

The base installs the CRDs the project owns (ModelDeployment, ModelDeploymentScaler); the input
kinds' CRDs come only with the component deploy/components/input-crds (rendered and checked by
tests/integration/test_kustomize_components.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpustack_render.cli.yamlio import load_documents
from gpustack_render.schema.crd import all_crds, crd_file_name
from gpustack_render.schema.kinds import OWNED_KINDS

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
COMPONENTS = DEPLOY / "components"
#: Parts that are not composed by the base: the generated CRDs (the base lists the owned ones by
#: file, the input-crds component takes the rest), and the opt-in node plugin (deploy/model-manager,
#: the chart's modelManager.enabled).
NOT_COMPOSED = {"crds", "model-manager"}


def _kustomization(directory: Path) -> dict[str, Any]:
    (kust,) = load_documents((directory / "kustomization.yaml").read_text())
    return dict(kust)


def _resources(directory: Path) -> list[str]:
    resources: list[str] = _kustomization(directory).get("resources", [])
    return resources


def _served_crd_files() -> list[str]:
    return [
        f"crds/{crd_file_name(c)}" for c in all_crds() if c["spec"]["names"]["kind"] in OWNED_KINDS
    ]


def test_top_level_composes_every_part() -> None:
    parts = {p.parent.name for p in DEPLOY.glob("*/kustomization.yaml")} - NOT_COMPOSED
    listed = _resources(DEPLOY)
    assert set(listed) == parts | set(_served_crd_files())
    assert listed[0] == "namespace"  # the namespace before what lives in it
    assert "components" not in _kustomization(DEPLOY)  # every component is opt-in


def test_the_base_installs_only_the_owned_crds() -> None:
    crd_entries = [r for r in _resources(DEPLOY) if r.startswith("crds")]
    assert crd_entries == _served_crd_files()
    # ModelArtifact, ModelDeployment, ModelDeploymentScaler, NodeModelStore
    assert len(crd_entries) == 4
    assert all((DEPLOY / entry).is_file() for entry in crd_entries)


def test_every_part_lists_existing_files_only() -> None:
    for kust in [*DEPLOY.glob("*/kustomization.yaml"), *COMPONENTS.glob("*/kustomization.yaml")]:
        listed = _resources(kust.parent)
        # A component may only patch (existing-secret), never be empty.
        assert listed or _kustomization(kust.parent).get("patches"), kust
        for name in listed:
            assert (kust.parent / name).exists(), f"{kust}: {name} missing"
        on_disk = {p.name for p in kust.parent.glob("*.yaml")} - {"kustomization.yaml"}
        assert on_disk <= set(listed), f"{kust.parent.name}: unlisted {on_disk - set(listed)}"


def test_components_are_components() -> None:
    names = sorted(p.parent.name for p in COMPONENTS.glob("*/kustomization.yaml"))
    assert names == ["cert-manager", "existing-secret", "input-crds", "servicemonitors"]
    for name in names:
        kust = _kustomization(COMPONENTS / name)
        assert kust["kind"] == "Component", name
        assert kust["apiVersion"] == "kustomize.config.k8s.io/v1alpha1", name


def test_system_namespace_matches_the_settings_default() -> None:
    from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE

    (ns,) = load_documents((DEPLOY / "namespace" / "namespace.yaml").read_text())
    assert ns["metadata"]["name"] == DEFAULT_SYSTEM_NAMESPACE
