"""The public names: importable, typed package, and documented in docs/python-api.md."""

from __future__ import annotations

import re
from pathlib import Path

import gpustack_render

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_every_public_name_exists() -> None:
    missing = [n for n in gpustack_render.__all__ if not hasattr(gpustack_render, n)]
    assert missing == []
    assert len(set(gpustack_render.__all__)) == len(gpustack_render.__all__)


def test_every_public_name_is_documented() -> None:
    text = DOC.read_text()
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", text))
    undocumented = sorted(set(gpustack_render.__all__) - documented)
    assert undocumented == []


def test_package_is_typed() -> None:
    assert (Path(gpustack_render.__file__).parent / "py.typed").exists()
