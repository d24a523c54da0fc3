"""The layout rules an import contract cannot express."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import pytest

import gpustack_render

PACKAGE = Path(gpustack_render.__file__).parent
#: The layers that do no I/O (everything but the command line).
PURE = (
    "core",
    "api",
    "schema",
    "engines",
    "deployment",
    "rendering",
    "admission",
    "injection",
    "reconcile",
    "elastic",
    "explain",
)


def _modules(layer: str) -> list[Path]:
    return sorted((PACKAGE / layer).rglob("*.py"))


@pytest.mark.parametrize("layer", PURE)
def test_pure_layers_never_call_open(layer: str) -> None:
    """``open`` is a builtin, so the import contract cannot forbid it; this does."""
    calls = [
        f"{path.relative_to(PACKAGE)}:{node.lineno}"
        for path in _modules(layer)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("open", "input", "print", "breakpoint")
    ]
    assert calls == []


def _packages() -> list[str]:
    names = ["gpustack_render"]
    for info in pkgutil.walk_packages([str(PACKAGE)], prefix="gpustack_render."):
        if info.ispkg:
            names.append(info.name)
    return names


@pytest.mark.parametrize("package", _packages())
def test_no_exported_name_hides_a_submodule(package: str) -> None:
    """``gpustack_render.render`` must be one thing: a name exported by a package is never also
    the name of one of its submodules."""
    module = importlib.import_module(package)
    submodules = {info.name for info in pkgutil.iter_modules(module.__path__)}
    exported = set(getattr(module, "__all__", ()))
    assert exported & submodules == set()


def test_every_module_lives_in_a_layer() -> None:
    """The root holds only the public API; every other module sits in a layer subpackage."""
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"]
