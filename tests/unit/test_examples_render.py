"""Every example under ``examples/`` renders without error, so the examples cannot rot."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import render as render_verb
from gpustack_render.cli.yamlio import load_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _examples() -> list[Path]:
    return sorted(EXAMPLES.glob("*.yaml"))


def test_there_are_at_least_six_examples() -> None:
    assert len(_examples()) >= 6


@pytest.mark.parametrize("path", _examples(), ids=lambda p: p.stem)
def test_example_renders(path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    args = build_parser().parse_args(["render", str(path)])
    assert render_verb.run(args, out, err) == 0, err.getvalue()
    objects = load_documents(out.getvalue())
    kinds = [o["kind"] for o in objects]
    assert "Pod" in kinds and "Service" in kinds
    assert path.read_text().startswith("#"), "an example opens with a comment saying what it shows"
