"""Golden cases: one pytest id per directory ``golden/<verb>-<case>/``, discovered, never listed.

``<verb>`` is ``render``, ``admit``, ``inject``, ``explain`` or ``crds``. Each case holds
``input.yaml`` (the request object first, then every looked-up object and an optional
``gpustack-settings`` ConfigMap), an optional ``case.yaml`` (``operation``; ``old``: the stored
object; ``description``) and exactly one expected file:

- ``crds-*``: ``rendered.yaml``, the output of ``gpustack-render crds`` (no input file);
- ``render-*``: ``rendered.yaml`` (exit 0, the command's YAML output) or ``error.txt`` (exit 1,
  the command's stderr). They pin the renderer, so they run with ``--validate=ignore`` (what the
  controller renders from stored objects) unless ``case.yaml`` sets ``validate``;
- ``admit-*`` / ``inject-*``: ``verdict.yaml``: ``allowed``, status code and reason, each cause's
  {type, field, origin}, the JSON Patch, warnings, and for an admitted ``inject`` case the
  mutated Pod (``object``);
- ``explain-*``: ``explained.txt`` and ``explained.json``, the verb's text and JSON output
  (``case.yaml`` may add ``old_inputs``: the objects the stored object was rendered with;
  ``flags``: extra command-line arguments; ``exit``: the expected exit code, 0 when absent;
  an ``observed.yaml`` beside ``input.yaml`` is passed as ``--observed``).
  Every JSON output is validated against ``docs/explain.schema.json``.

``pytest --update-golden`` rewrites the expected file: review the diff. A missing expected file or
an unknown file in a case directory fails, and every case must give byte-identical output twice.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from gpustack_render.cli import yamlio
from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import admit, crds, explain, inject
from gpustack_render.cli.verbs import render as render_verb

GOLDEN = Path(__file__).resolve().parent.parent / "golden"
VERBS = ("render", "admit", "inject", "explain", "crds")
EXPECTED = ("rendered.yaml", "error.txt", "verdict.yaml")
#: An explain case's expected files: both are written and checked.
EXPLAINED = ("explained.txt", "explained.json")
KNOWN = {"input.yaml", "case.yaml", "observed.yaml", "README.md", *EXPECTED, *EXPLAINED}
SCHEMA = GOLDEN.parent / "docs" / "explain.schema.json"


def _cases() -> list[Any]:
    if not GOLDEN.is_dir():
        return []
    out = []
    for case in sorted(p for p in GOLDEN.iterdir() if p.is_dir()):
        verb = case.name.split("-", 1)[0]
        out.append(pytest.param(verb, case, id=case.name))
    return out


def _case_spec(case: Path) -> dict[str, Any]:
    if not (case / "case.yaml").exists():
        return {}
    docs = yamlio.load_documents((case / "case.yaml").read_text(), source=str(case / "case.yaml"))
    return docs[0] if docs else {}


def run_explain(case: Path, tmp_path: Path) -> dict[str, str]:
    """Run one explain case in both formats; returns {expected file name: content}."""
    spec = _case_spec(case)
    argv = ["explain", str(case / "input.yaml"), *[str(f) for f in spec.get("flags") or ()]]
    if "old" in spec:
        old = tmp_path / "old.yaml"
        old.write_text(yamlio.dump_yaml([spec["old"], *(spec.get("old_inputs") or ())]))
        argv += ["--old", str(old)]
    if (case / "observed.yaml").exists():
        argv += ["--observed", str(case / "observed.yaml")]
    outputs: dict[str, str] = {}
    for name, fmt in zip(EXPLAINED, ("text", "json"), strict=True):
        out, err = io.StringIO(), io.StringIO()
        code = explain.run(build_parser().parse_args([*argv, "-o", fmt]), out, err)
        assert code == int(spec.get("exit", 0)), f"{case.name}: exit {code}: {err.getvalue()}"
        outputs[name] = out.getvalue()
    return outputs


def _validate_explained(text: str) -> None:
    import jsonschema

    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(json.loads(text))


def _check_explain(case: Path, tmp_path: Path, update_golden: bool) -> None:
    actual = run_explain(case, tmp_path)
    assert run_explain(case, tmp_path) == actual, "a second run differs"
    _validate_explained(actual["explained.json"])
    if update_golden:
        for name, content in actual.items():
            (case / name).write_text(content)
        return
    for name, content in actual.items():
        assert (case / name).exists(), (
            f"{case.name}: no {name}; run pytest --update-golden and review the diff"
        )
        assert content == (case / name).read_text(), f"{case.name}/{name} differs from the output"


def run_case(verb: str, case: Path, tmp_path: Path) -> tuple[str, str]:
    """Run one case; returns (expected file name, its content)."""
    spec = _case_spec(case)
    inp = str(case / "input.yaml")
    if verb == "crds":
        out, err = io.StringIO(), io.StringIO()
        code = crds.run(build_parser().parse_args(["crds"]), out, err)
        assert code == 0, err.getvalue()
        return "rendered.yaml", out.getvalue()
    if verb == "render":
        out, err = io.StringIO(), io.StringIO()
        validate = str(spec.get("validate", "ignore"))
        args = build_parser().parse_args(["render", inp, f"--validate={validate}"])
        code = render_verb.run(args, out, err)
        assert code in (0, 1), err.getvalue()
        return ("rendered.yaml", out.getvalue()) if code == 0 else ("error.txt", err.getvalue())
    old_file = None
    if "old" in spec:
        old = tmp_path / "old.yaml"
        old.write_text(yamlio.dump_yaml_one(spec["old"]))
        old_file = str(old)
    operation = spec.get("operation")
    summary: dict[str, Any]
    if verb == "admit":
        verdict, _ = admit.admit_review([inp], old_file=old_file, operation=operation)
        summary = verdict.summary()
    else:
        verdict, pod = inject.inject_review([inp], old_file=old_file, operation=operation)
        summary = verdict.summary()
        if verdict.allowed and verdict.patch:
            summary["object"] = jsonpatch.apply_patch(pod, verdict.patch)
    return "verdict.yaml", yamlio.dump_yaml_one(summary)


@pytest.mark.parametrize(("verb", "case"), _cases())
def test_golden(verb: str, case: Path, tmp_path: Path, update_golden: bool) -> None:
    assert verb in VERBS, f"{case.name}: a case directory starts with one of {VERBS}"
    unknown = {p.name for p in case.iterdir()} - KNOWN
    assert not unknown, f"unknown files in {case}: {sorted(unknown)}"
    assert verb == "crds" or (case / "input.yaml").exists(), f"{case} has no input.yaml"
    if verb == "explain":
        _check_explain(case, tmp_path, update_golden)
        return
    name, actual = run_case(verb, case, tmp_path)
    assert run_case(verb, case, tmp_path) == (name, actual), "a second run differs"
    target = case / name
    if update_golden:
        for stale in EXPECTED:
            if stale != name and (case / stale).exists():
                (case / stale).unlink()
        target.write_text(actual)
        return
    present = [n for n in EXPECTED if (case / n).exists()]
    assert target.exists(), (
        f"{case.name}: produced {name} but the case holds {present}; "
        "run pytest --update-golden and review the diff"
    )
    assert actual == target.read_text(), f"{case.name}/{name} differs from the output"
