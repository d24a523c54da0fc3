"""Golden cases: one pytest id per directory under ``golden/<verb>/<case>/``, discovered.

Each case holds ``input.yaml`` (the request object first, then every looked-up object and an
optional ``gpustack-settings`` ConfigMap), an optional ``case.yaml`` (``operation``, ``old``:
the stored object, ``output``: yaml|json) and exactly one expected file:

- ``render``: ``rendered.yaml`` (exit 0) or ``error.txt`` (exit 1, the stderr text);
- ``admit`` / ``inject``: ``verdict.yaml``, the AdmissionReview response.

``pytest --update-golden`` rewrites the expected file; review the diff. A missing expected file or
an unknown file in a case directory fails. Every case also runs twice and must be byte-identical.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from gpustack_render import cli, yamlio

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
VERBS = ("render", "admit", "inject")
KNOWN = {"input.yaml", "case.yaml", "rendered.yaml", "error.txt", "verdict.yaml", "README.md"}


def _cases() -> list[Any]:
    out = []
    for verb in VERBS:
        root = GOLDEN / verb
        if not root.is_dir():
            continue
        for case in sorted(p for p in root.iterdir() if p.is_dir()):
            out.append(pytest.param(verb, case, id=f"{verb}/{case.name}"))
    return out


def run_case(verb: str, case: Path, tmp_path: Path) -> tuple[int, str, str, str]:
    """Run one case through the command line; returns (exit, stdout, stderr, expected name)."""
    spec: dict[str, Any] = {}
    if (case / "case.yaml").exists():
        docs = yamlio.load_documents((case / "case.yaml").read_text(), source="case.yaml")
        spec = docs[0] if docs else {}
    argv = [verb, str(case / "input.yaml"), "-o", str(spec.get("output", "yaml"))]
    if verb != "render":
        if "old" in spec:
            old = tmp_path / "old.yaml"
            old.write_text(yamlio.dump_yaml_one(spec["old"]))
            argv += ["--old", str(old)]
        if "operation" in spec:
            argv += ["--operation", str(spec["operation"])]
    out, err = io.StringIO(), io.StringIO()
    args = cli._parser().parse_args(argv)
    try:
        code = cli.COMMANDS[args.verb](args, out, err)
    except cli.UsageError as exc:
        code, err = cli.EXIT_USAGE, io.StringIO(str(exc))
    if verb == "render":
        expected = "rendered.yaml" if code == 0 else "error.txt"
    else:
        expected = "verdict.yaml"
    return code, out.getvalue(), err.getvalue(), expected


@pytest.mark.parametrize(("verb", "case"), _cases())
def test_golden(verb: str, case: Path, tmp_path: Path, update_golden: bool) -> None:
    unknown = {p.name for p in case.iterdir()} - KNOWN
    assert not unknown, f"unknown files in {case}: {sorted(unknown)}"
    assert (case / "input.yaml").exists(), f"{case} has no input.yaml"
    code, stdout, stderr, expected_name = run_case(verb, case, tmp_path)
    assert code != cli.EXIT_USAGE, f"usage error: {stderr}"
    actual = stderr if expected_name == "error.txt" else stdout
    again = run_case(verb, case, tmp_path)
    assert again[:3] == (code, stdout, stderr), "a second run is not byte-identical"
    target = case / expected_name
    if update_golden:
        for stale in ("rendered.yaml", "error.txt", "verdict.yaml"):
            if stale != expected_name and (case / stale).exists():
                (case / stale).unlink()
        target.write_text(actual)
        return
    others = [n for n in ("rendered.yaml", "error.txt", "verdict.yaml") if (case / n).exists()]
    assert target.exists(), (
        f"{case}: expected {expected_name} (exit {code}) but the case has {others}; "
        "run pytest --update-golden and review the diff"
    )
    assert actual == target.read_text(), f"{case}/{expected_name} differs (exit {code})"
