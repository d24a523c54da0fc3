"""Every third-party module the five packages import is a runtime dependency, and every
runtime dependency is imported by them.

The image (the Dockerfile's ``pip install .`` and ``make image-rootfs``) installs
``[project] dependencies`` (and what they require) only, not the test or dev extras: a module
imported by the library or a shell but installed only with the extras is there in the venv of
the tests and missing in the image, where the shell then fails to start.
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "gpustack_render",
    "gpustack_kube",
    "gpustack_controller",
    "gpustack_webhook",
    "gpustack_modelmanager",
)


def _imported_top_level_modules() -> dict[str, str]:
    """Top-level module -> the first file importing it (absolute imports only)."""
    found: dict[str, str] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.partition(".")[0], str(path.relative_to(ROOT)))
    return found


def _runtime_distributions() -> set[str]:
    """``[project] dependencies`` and, as installed here, everything they require (no extras)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    todo = [Requirement(req) for req in project["dependencies"]]
    closure: set[str] = set()
    while todo:
        req = todo.pop()
        name = _normalise(req.name)
        if name in closure or (req.marker and not req.marker.evaluate({"extra": ""})):
            continue
        closure.add(name)
        todo += [Requirement(r) for r in importlib.metadata.requires(req.name) or []]
    return closure


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_runtime_dependency() -> None:
    distributions = importlib.metadata.packages_distributions()
    runtime = _runtime_distributions()
    missing = {}
    for module, where in _imported_top_level_modules().items():
        if module in sys.stdlib_module_names or module in PACKAGES or module == "__future__":
            continue
        owners = {_normalise(d) for d in distributions.get(module, [])}
        assert owners, f"{module} (imported by {where}) is installed by no distribution"
        if not owners & runtime:
            missing[module] = where
    assert not missing, f"imported but not in [project] dependencies: {missing}"


def test_every_runtime_dependency_is_imported() -> None:
    """The converse: ``[project] dependencies`` holds only what the three packages import, so
    the image carries nothing that only the tests or ``hack/`` use (those belong in the test
    extra)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_normalise(Requirement(req).name) for req in project["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    imported = {
        _normalise(dist)
        for module in _imported_top_level_modules()
        for dist in distributions.get(module, [])
    }
    assert declared - imported == set()
