"""deploy/: the top-level kustomization composes every part, and every part lists real files."""

from __future__ import annotations

from pathlib import Path

from gpustack_render.cli.yamlio import load_documents

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _resources(directory: Path) -> list[str]:
    (kust,) = load_documents((directory / "kustomization.yaml").read_text())
    resources: list[str] = kust["resources"]
    return resources


def test_top_level_composes_every_part() -> None:
    parts = sorted(p.parent.name for p in DEPLOY.glob("*/kustomization.yaml"))
    assert sorted(_resources(DEPLOY)) == parts
    assert _resources(DEPLOY)[0] == "namespace"  # the namespace before what lives in it


def test_every_part_lists_existing_files_only() -> None:
    for kust in DEPLOY.glob("*/kustomization.yaml"):
        listed = _resources(kust.parent)
        assert listed, kust
        for name in listed:
            assert (kust.parent / name).is_file(), f"{kust}: {name} missing"
        on_disk = {p.name for p in kust.parent.glob("*.yaml")} - {"kustomization.yaml"}
        assert on_disk == set(listed), f"{kust.parent.name}: unlisted {on_disk - set(listed)}"


def test_system_namespace_matches_the_settings_default() -> None:
    from gpustack_render.core.settings import DEFAULT_SYSTEM_NAMESPACE

    (ns,) = load_documents((DEPLOY / "namespace" / "namespace.yaml").read_text())
    assert ns["metadata"]["name"] == DEFAULT_SYSTEM_NAMESPACE
