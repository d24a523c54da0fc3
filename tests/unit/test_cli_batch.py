"""Batch calls: ``-f``/``-R`` like kubectl, plain paths and directories, one output stream in a
stable order, each deployment judged with the objects beside it, the worst exit code."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
REFUSED = ROOT / "golden" / "admit-owned-arg-vllm-prefix" / "input.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_by_one(paths: list[Path], capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    objects = []
    for path in paths:
        code, out, _ = run(["render", str(path)], capsys)
        assert code == 0
        objects.extend(yamlio.load_documents(out))
    return objects


def test_a_directory_renders_each_file_in_path_order_as_one_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    code, out, _ = run(["render", str(EXAMPLES)], capsys)
    assert code == 0
    assert yamlio.load_documents(out) == _one_by_one(files, capsys)
    assert run(["render", "-f", str(EXAMPLES)], capsys)[1] == out, "-f reads the same"
    assert run(["render", str(EXAMPLES)], capsys)[1] == out, "and the same twice"


def test_json_batch_is_one_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", "-o", "json", str(EXAMPLES)], capsys)
    assert code == 0 and out.startswith("{") and out.count('"kind": "List"') == 1


def test_subdirectories_need_r(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sub").mkdir()
    shutil.copy(EXAMPLES / "qwen-chat.yaml", tmp_path / "sub" / "a.yaml")
    shutil.copy(EXAMPLES / "cpu-only.yaml", tmp_path / "b.yml")
    (tmp_path / "notes.txt").write_text("not read")
    code, out, _ = run(["render", "--summary", str(tmp_path)], capsys)
    assert code == 0 and out.count("\n") == 1 and "b.yml" in out
    code, out, _ = run(["render", "--summary", "-R", str(tmp_path)], capsys)
    assert code == 0 and [line.split("\t")[1] for line in out.splitlines()] == [
        "team-a/embeddings",
        "team-a/qwen-chat",
    ]


def test_exit_code_is_the_worst_and_the_others_still_render(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shutil.copy(EXAMPLES / "qwen-chat.yaml", tmp_path / "a.yaml")
    shutil.copy(REFUSED, tmp_path / "b.yaml")
    code, out, err = run(["render", str(tmp_path)], capsys)
    assert code == 1
    assert {
        d["metadata"]["labels"]["app.kubernetes.io/instance"]
        for d in yamlio.load_documents(out)
        if d["kind"] == "Pod"
    } == {"qwen-chat"}
    assert "render: refused: ModelDeployment team-a/qwen: spec.roles[0].extraArgs[0]" in err
    (tmp_path / "c.yaml").write_text("a: [\n")
    code, out, err = run(["render", str(tmp_path)], capsys)
    assert code == 2 and "c.yaml: not valid YAML" in err and "kind: Pod" in out


def test_summary_has_one_line_per_deployment(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["render", "--summary", str(EXAMPLES / "takeover.yaml"), "-f", str(REFUSED)], capsys
    )
    assert code == 1
    lines = [line.split("\t") for line in out.splitlines()]
    assert [row[1:] for row in lines] == [
        ["team-c/custom-launcher", "rendered", "2 Pods", "1 warnings"],
        ["team-a/qwen", "refused", "0 Pods", "0 warnings"],
    ]
    code, out, _ = run(["admit", "--summary", str(EXAMPLES)], capsys)
    assert code == 0 and out.count("\tallowed\t") == len(list(EXAMPLES.glob("*.yaml")))


def test_several_deployments_in_one_file_are_each_rendered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = yamlio.load_documents((EXAMPLES / "qwen-chat.yaml").read_text())
    twin = {**docs[0], "metadata": {**docs[0]["metadata"], "name": "qwen-twin"}}
    f = tmp_path / "two.yaml"
    f.write_text(yamlio.dump_yaml([docs[0], twin, *docs[1:]]))
    code, out, _ = run(["render", "--summary", str(f)], capsys)
    assert code == 0 and out.count("\trendered\t2 Pods") == 2


def test_admit_of_several_is_a_stream_of_responses(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["admit", str(EXAMPLES)], capsys)
    responses = yamlio.load_documents(out)
    assert code == 0 and len(responses) == len(list(EXAMPLES.glob("*.yaml")))
    assert all(r["allowed"] for r in responses)


def test_no_operand_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["render"], capsys)
    assert code == 2 and err.count("\n") == 1


def test_in_a_batch_every_stderr_line_names_its_deployment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several deployments: each warning and cause says which deployment it is about, after
    its tag (``Warning:`` stays first, as kubectl prints it); one deployment: no prefix."""
    shutil.copy(EXAMPLES / "takeover.yaml", tmp_path / "a.yaml")
    shutil.copy(REFUSED, tmp_path / "b.yaml")
    for argv in (["render"], ["render", "--validate=warn"], ["admit"], ["admit", "--summary"]):
        _, _, err = run([*argv, str(tmp_path)], capsys)
        lines = err.splitlines()
        assert lines, argv
        for line in lines:
            tag, _, rest = line.partition(": ")
            if tag == "render":
                rest = rest.removeprefix("refused: ")
            elif rest.startswith("admission would refuse: "):
                rest = rest.removeprefix("admission would refuse: ")
            assert rest.startswith(
                ("ModelDeployment team-c/custom-launcher: ", "ModelDeployment team-a/qwen: ")
            ), (argv, line)
    _, _, err = run(["render", str(tmp_path / "a.yaml")], capsys)
    assert err.startswith("Warning: spec.roles[0].extraArgs: inert")
    _, _, err = run(["render", str(tmp_path / "b.yaml")], capsys)
    assert err.startswith("render: refused: spec.roles[0].extraArgs[0]")


def test_a_directory_that_cannot_be_listed_is_reported_and_the_others_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "locked").mkdir()
    shutil.copy(EXAMPLES / "qwen-chat.yaml", tmp_path / "sub" / "a.yaml")
    shutil.copy(EXAMPLES / "cpu-only.yaml", tmp_path / "locked" / "b.yaml")
    real_scandir = os.scandir

    def scandir(path: str) -> object:  # chmod 000 does not stop root: refuse the listing here
        if os.path.basename(path) == "locked":
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    code, out, err = run(["render", "--summary", "-R", str(tmp_path)], capsys)
    assert code == 2
    assert out.count("\trendered\t") == 1
    assert err == f"gpustack-render: {tmp_path / 'locked'}: cannot read: Permission denied\n"
    code, out, err = run(["render", str(tmp_path / "locked")], capsys)
    assert code == 2 and out == ""
    assert err == f"gpustack-render: {tmp_path / 'locked'}: cannot read: Permission denied\n"


def test_a_directory_with_nothing_to_read_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("not read")
    for verb in ("render", "admit", "explain"):
        code, out, err = run([verb, str(tmp_path)], capsys)
        assert code == 2 and out == ""
        assert err == f"gpustack-render: {verb}: no ModelDeployment in {tmp_path}\n"


@pytest.mark.parametrize("replicas", ["abc", "[1]", "1.5", "1e30"])
def test_admit_of_a_batch_counts_no_pods_of_a_refused_deployment(
    replicas: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (EXAMPLES / "qwen-chat.yaml").read_text()
    assert "    replicas: 2\n" in text
    bad = text.replace("    replicas: 2\n", f"    replicas: {replicas}\n")
    (tmp_path / "bad.yaml").write_text(bad)
    shutil.copy(EXAMPLES / "cpu-only.yaml", tmp_path / "good.yaml")
    code, out, err = run(["admit", "--summary", str(tmp_path)], capsys)
    assert code == 1 and "internal error" not in err
    assert [line.split("\t")[2:4] for line in out.splitlines()] == [
        ["refused", "0 Pods"],
        ["allowed", "2 Pods"],
    ]
    code, out, err = run(["admit", str(tmp_path)], capsys)
    assert code == 1 and [r["allowed"] for r in yamlio.load_documents(out)] == [False, True]


def test_filename_takes_a_comma_list_as_kubectl_does(capsys: pytest.CaptureFixture[str]) -> None:
    takeover, cpu = str(EXAMPLES / "takeover.yaml"), str(EXAMPLES / "cpu-only.yaml")
    listed = run(["render", "--summary", "-f", f"{takeover},{cpu}"], capsys)
    repeated = run(["render", "--summary", "-f", takeover, "-f", cpu], capsys)
    assert listed == repeated and listed[0] == 0 and listed[1].count("\trendered\t") == 2
