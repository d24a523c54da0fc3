"""``explain``: the JSON Schema file, the offline path never touching the observed-state part,
the live form, the flags and the gates (the outputs themselves are golden cases)."""

from __future__ import annotations

import argparse
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import exits
from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs import explain as verb
from gpustack_render.explain.schema import EXPLAIN_JSON_SCHEMA, schema_text

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "docs" / "explain.schema.json"
CASE = ROOT / "golden" / "explain-update-roll-image"


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0), "", ""
    try:
        code = cli.command(args.verb)(args, out, err)
    except exits.UsageError as exc:
        err.write(f"gpustack-render: {exc}\n")
        code = exits.EXIT_USAGE
    return code, out.getvalue(), err.getvalue()


def _old_file(tmp_path: Path) -> str:
    from gpustack_render.cli import yamlio

    spec = yamlio.load_documents((CASE / "case.yaml").read_text())[0]
    path = tmp_path / "old.yaml"
    path.write_text(yamlio.dump_yaml_one(spec["old"]))
    return str(path)


def test_schema_file_is_the_generated_schema() -> None:
    assert SCHEMA_FILE.read_text() == schema_text(), (
        "docs/explain.schema.json is stale: run make docs"
    )
    assert json.loads(SCHEMA_FILE.read_text()) == EXPLAIN_JSON_SCHEMA


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(EXPLAIN_JSON_SCHEMA)


def test_without_observed_nothing_calls_the_observed_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpustack_render.explain import observed, report, text

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("the observed-state part was called without --observed")

    monkeypatch.setattr(observed, "split_observed", boom)
    monkeypatch.setattr(report, "explain_observed", boom)
    monkeypatch.setattr(report, "observed_to_json", boom)
    monkeypatch.setattr(text, "observed_text", boom)
    for fmt in ("text", "json", "yaml"):
        code, out, err = _run(
            ["explain", str(CASE / "input.yaml"), "--old", _old_file(tmp_path), "-o", fmt]
        )
        assert code == 0, err
        assert "observed" not in (json.loads(out) if fmt == "json" else {})
        if fmt == "yaml":
            assert "observed" not in yaml.safe_load(out)
        if fmt == "text":
            assert "\nobserved " not in out and out.startswith("ModelDeployment ")


@pytest.mark.parametrize(
    ("operand", "name"),
    [
        pytest.param("md/qwen-chat", "qwen-chat", id="short"),
        pytest.param("modeldeployment/qwen-chat", "qwen-chat", id="kind"),
        pytest.param("modeldeployments/qwen-chat", "qwen-chat", id="plural"),
        pytest.param("modeldeployments.worker.gpustack.ai/q", "q", id="plural-group"),
        pytest.param("pods/qwen", None, id="other-kind"),
        pytest.param("md/", None, id="no-name"),
        pytest.param("edited.yaml", None, id="a-file"),
    ],
)
def test_live_target(operand: str, name: str | None) -> None:
    assert verb.live_target(operand) == name


def test_an_existing_file_is_never_the_live_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "qwen").write_text("")
    monkeypatch.chdir(tmp_path)
    assert verb.live_target("md/qwen") is None


def test_live_mode_without_a_kubeconfig_exits_2_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    code, out, err = _run(["explain", "md/qwen-chat", "-n", "team-a", "--kubeconfig", str(missing)])
    assert code == 2
    assert out == ""
    assert len(err.splitlines()) == 1 and str(missing) in err


def test_live_mode_takes_no_old_or_observed_file() -> None:
    code, _, err = _run(["explain", "md/qwen-chat", "--observed", str(CASE / "input.yaml")])
    assert code == 2 and "live mode" in err


def test_kubeconfig_needs_the_live_form() -> None:
    code, _, err = _run(["explain", str(CASE / "input.yaml"), "--kubeconfig", "/nowhere"])
    assert code == 2 and "md/NAME" in err


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param(["--fail-on", "rolls"], id="fail-on-unknown"),
        pytest.param(["--fail-on", ","], id="fail-on-empty"),
        pytest.param(["--max-replaced", "-1"], id="max-replaced-negative"),
        pytest.param(["--max-replaced", "two"], id="max-replaced-word"),
        pytest.param(["-o", "name"], id="output-name"),
    ],
)
def test_bad_flags_exit_2(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = _run(["explain", str(CASE / "input.yaml"), *flags])
    assert code == 2


def test_fail_on_takes_a_comma_list_and_repeats() -> None:
    args = build_parser().parse_args(
        ["explain", "x.yaml", "--fail-on", "roll,refused", "--fail-on=roll"]
    )
    assert args.fail_on == ["roll", "refused", "roll"]
    assert args.output == "text"


def test_every_explain_flag_has_help() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    explain = sub.choices["explain"]
    missing = [a.dest for a in explain._actions if not a.help or a.help == argparse.SUPPRESS]
    assert missing == []


def test_completion_knows_the_verb_and_its_flags() -> None:
    code, out, _ = _run(["completion", "bash"])
    assert code == 0
    for word in ("explain", "--max-replaced", "--fail-on", "--observed", "--kubeconfig"):
        assert word in out


def test_gates_trip_on_the_roll(tmp_path: Path) -> None:
    old = _old_file(tmp_path)
    base = ["explain", str(CASE / "input.yaml"), "--old", old]
    assert _run([*base, "--max-replaced", "2"])[0] == 0
    code, _, err = _run([*base, "--max-replaced", "1"])
    assert code == 1 and "--max-replaced 1" in err
    assert _run([*base, "--fail-on", "refused"])[0] == 0
    assert _run([*base, "--fail-on", "roll"])[0] == 1


def test_summary_prints_one_line_per_deployment(tmp_path: Path) -> None:
    code, out, _ = _run(
        ["explain", str(CASE / "input.yaml"), "--old", _old_file(tmp_path), "--summary"]
    )
    assert code == 0
    (line,) = out.splitlines()
    assert "team-a/qwen" in line and "server roll" in line and "2 replaced" in line


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [")
    assert _run(["explain", str(bad)])[0] == 2
    assert _run(["explain", str(CASE / "input.yaml"), "--old", str(bad)])[0] == 2
    assert _run(["explain", str(CASE / "input.yaml"), "--observed", str(tmp_path / "no")])[0] == 2


def test_library_entry_point_is_public() -> None:
    import gpustack_render
    from gpustack_render.cli import yamlio
    from gpustack_render.schema.lookups import StaticLookups

    docs = yamlio.load_documents((CASE / "input.yaml").read_text())
    from gpustack_render.cli.documents import read_bundle

    bundle = read_bundle([("input.yaml", (CASE / "input.yaml").read_text())])
    answer = gpustack_render.explain_deployment(
        docs[0],
        lookups=StaticLookups.of(bundle.inputs, default_namespace="team-a"),
        settings=gpustack_render.Settings(),
    )
    assert answer.operation == "CREATE" and answer.admission.allowed
    assert [r.action for r in answer.roles] == ["create"]
    assert gpustack_render.explanation_json(answer)["kind"] == "Explanation"
    assert gpustack_render.explanation_text(answer).startswith("ModelDeployment team-a/qwen")


def test_the_three_sessions_in_the_docs_are_real_output() -> None:
    """Each session in docs/explain.md prints exactly a golden case's reviewed output (plus the
    gate lines its flags add), so the guide cannot drift from what the verb prints."""
    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "explain.md").read_text()
    section = doc[doc.index("## Three sessions") :]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    goldens = [p.read_text() for p in sorted((root / "golden").glob("explain-*/explained.txt"))]
    sessions = 0
    for block in blocks:
        lines = block.splitlines(keepends=True)
        command = max(i for i, line in enumerate(lines) if line.startswith("$ gpustack-render"))
        end = next(i for i, line in enumerate(lines) if line.startswith("$ echo"))
        shown = "".join(lines[command + 1 : end])
        match = [g for g in goldens if shown.startswith(g)]
        assert match, f"a session's output is no golden case's output:\n{shown}"
        extra = shown[len(match[0]) :].splitlines()
        assert all(line.startswith(("gates passed:", "gate failed:")) for line in extra), extra
        sessions += 1
    assert sessions == 3


def test_an_observed_export_may_exceed_one_requests_size_limit(tmp_path: Path) -> None:
    """A ``kubectl get`` export of a big deployment is many objects, not one request: the 3 MiB
    limit of an input file does not apply to it (a wider one does)."""
    from gpustack_render.cli import yamlio

    pods = [
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "namespace": "team-a"}}
        for i in range(40_000)
    ]
    export = tmp_path / "observed.json"
    export.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": pods}))
    assert export.stat().st_size > yamlio.MAX_BYTES
    documents = verb._observed(str(export), io.StringIO())
    assert documents is not None and len(documents[0]["items"]) == 40_000
    with pytest.raises(yamlio.DocumentError, match="larger than the limit"):
        yamlio.load_documents(export.read_text(), source=str(export))
