"""The command line's plumbing: usage errors, unreadable input and the crds verb."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli.yamlio import load_documents
from gpustack_render.schema.crd import all_crds

MD = """\
apiVersion: worker.gpustack.ai/v1
kind: ModelDeployment
metadata: {name: qwen, namespace: team-a}
spec:
  model: {name: Qwen/Qwen3-8B}
  engine: {name: vLLM, image: vllm/vllm-openai:v0.25.1}
  roles: [{name: server, instanceType: a10g}]
"""


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_crds_prints_every_crd(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["crds"], capsys)
    assert code == 0
    assert load_documents(out) == all_crds()


def test_crds_json_is_a_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["crds", "-o", "json"], capsys)
    assert code == 0
    (lst,) = [out]
    assert load_documents(lst) == all_crds()


@pytest.mark.parametrize("verb", ["render", "admit", "inject"])
def test_missing_file_is_exit_2_naming_it(
    verb: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run([verb, str(tmp_path / "nope.yaml")], capsys)
    assert code == 2
    assert "nope.yaml" in err and err[-1] == "\n" and err.count("\n") == 1


@pytest.mark.parametrize(
    ("document", "code", "message"),
    [
        pytest.param(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n",
            1,  # read: refused for its InstanceType, not given here
            "Warning: {f}: document 2: skipped Deployment x (apps/v1)",
            id="another-groups-kind-skipped",
        ),
        pytest.param(
            "apiVersion: worker.gpustack.ai/v1\nkind: Modeldeployment\n",
            2,
            "{f}: document 2: unknown kind worker.gpustack.ai/v1/Modeldeployment",
            id="unknown-kind-of-the-project",
        ),
    ],
)
def test_a_kind_not_read_names_file_and_document(
    document: str, code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(MD + "---\n" + document)
    got, _, err = run(["render", str(f)], capsys)
    assert got == code and message.format(f=f) in err, err


def test_no_model_deployment_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "in.yaml"
    f.write_text("apiVersion: worker.gpustack.ai/v1\nkind: InstanceType\nmetadata: {name: t}\n")
    code, _, err = run(["render", str(f)], capsys)
    assert code == 2 and "no ModelDeployment" in err
    code, _, err = run(["admit", str(f)], capsys)
    assert code == 2 and "no ModelDeployment" in err


def test_update_without_old_is_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(MD)
    code, _, err = run(["admit", str(f), "--operation", "UPDATE"], capsys)
    assert code == 2 and "--old" in err


def test_broken_yaml_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "in.yaml"
    f.write_text("kind: [\n")
    code, _, err = run(["render", str(f)], capsys)
    assert code == 2 and "in.yaml" in err


def test_bad_settings_value_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "in.yaml"
    f.write_text(
        MD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpustack-settings}\n"
        "data: {native-sidecars: sometimes}\n"
    )
    code, _, err = run(["render", str(f)], capsys)
    assert code == 2 and "native-sidecars" in err


def test_bad_verb_is_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpustack_render.cli", "frobnicate"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2


def test_console_script_reads_stdin() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpustack_render.cli", "render", "-"],
        input="apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n",
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        "Warning: <stdin>: document 1: skipped Secret s (v1): gpustack-render does not read "
        "this kind",
        "gpustack-render: render: no ModelDeployment in -",
    ]


def test_admit_delete_needs_only_the_stored_object(capsys: pytest.CaptureFixture[str]) -> None:
    # A DELETE request carries no object (oldObject only): --old is the whole input.
    root = Path(__file__).resolve().parents[2]
    stored = str(root / "golden" / "admit-delete-always-allowed" / "input.yaml")
    code = cli.main(["admit", "--operation", "DELETE", "--old", stored])
    out = capsys.readouterr().out
    assert code == 0 and load_documents(out) == [{"allowed": True, "warnings": []}]
    assert cli.main(["admit", "--operation", "DELETE"]) == 2
