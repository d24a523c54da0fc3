"""One version everywhere: the package metadata, ``pyproject.toml``, the image the manifests and
the chart name, and the newest released CHANGELOG section (Keep a Changelog)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

from ruamel.yaml import YAML

import gpustack_render
from gpustack_render import __version__

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_version() -> str:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return str(data["project"]["version"])


def test_version_comes_from_the_package_metadata() -> None:
    assert __version__ == importlib.metadata.version("gpustack-render")
    assert gpustack_render.__version__ == _pyproject_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_every_manifest_names_the_image_of_this_version() -> None:
    images = {
        line.split("image:", 1)[1].strip()
        for path in sorted((ROOT / "deploy").rglob("deployment.yaml"))
        for line in path.read_text().splitlines()
        if line.strip().startswith("image: gpustack/gpustack-render")
    }
    assert images == {f"gpustack/gpustack-render:v{__version__}"}


def test_the_chart_version_and_app_version_follow_the_project() -> None:
    chart = YAML(typ="safe").load((ROOT / "charts" / "gpustack-render" / "Chart.yaml").read_text())
    assert chart["version"] == __version__
    assert chart["appVersion"] == __version__


def test_the_changelog_has_an_unreleased_section_then_this_release() -> None:
    headings = re.findall(r"^## (.+)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert headings[0] == "[Unreleased]"
    release = re.fullmatch(r"\[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})", headings[1])
    assert release is not None, headings[1]
    assert release.group(1) == __version__


def test_the_operations_guide_covers_install_upgrade_and_uninstall() -> None:
    """The guide's names are the code's: the finalizer, the floor annotation, the check and the
    LocalQueue label it tells an operator to act on."""
    from gpustack_render.core import labels
    from gpustack_render.reconcile.claims import FINALIZER
    from gpustack_render.reconcile.jointcheck import CHECK_NAME

    text = (ROOT / "docs" / "operations.md").read_text()
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings.index("Install") < headings.index("Upgrade") < headings.index("Uninstall")
    uninstall = text.split("## Uninstall", 1)[1].split("\n## ", 1)[0]
    for name in (FINALIZER, CHECK_NAME, f"{labels.MANAGED_BY}={labels.MANAGED_BY_VALUE}"):
        assert name in uninstall, name
    assert uninstall.index("Delete the ModelDeployments") < uninstall.index("helm uninstall")
    upgrade = text.split("## Upgrade", 1)[1].split("\n## ", 1)[0]
    assert labels.MIN_RENDER_VERSION in upgrade
