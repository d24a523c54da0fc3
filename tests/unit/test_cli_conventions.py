"""Command-line conventions: --version, -o name, -n, help on every flag, a completion script
generated from the parser, the three console scripts, and one-line answers to the bad flags of
the controller and the webhook server."""

from __future__ import annotations

import argparse
import errno
import io
import os
import shutil
import subprocess
import sys
import tomllib
from importlib import import_module
from importlib.metadata import version
from pathlib import Path

import pytest
from test_webhook_tls import write_pair

from gpustack_controller import __main__ as controller_main
from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.parser import build_parser
from gpustack_render.cli.verbs.completion import script
from gpustack_render.rendering.hashing import CURRENT_RENDER_VERSION
from gpustack_webhook import __main__ as webhook_main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qwen-chat.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_version_names_the_package_and_the_render_version(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    assert out == (
        f"gpustack-render {version('gpustack-render')} (render version {CURRENT_RENDER_VERSION})\n"
    )


def test_output_name_is_kind_group_slash_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["render", "-o", "name", str(EXAMPLE)], capsys)
    assert code == 0
    assert out.splitlines() == [
        "localqueue.kueue.x-k8s.io/gpustack-fnv64-0123456789abcdef",
        "service/qwen-chat",
        "service/qwen-chat-server",
        "pod/qwen-chat-server-",
        "pod/qwen-chat-server-",
    ]


def test_namespace_flag_fills_namespaced_objects_without_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = yamlio.load_documents(EXAMPLE.read_text())
    for doc in docs:
        doc["metadata"].pop("namespace", None)
    f = tmp_path / "in.yaml"
    f.write_text(yamlio.dump_yaml(docs))
    for argv, namespace in ((["render"], "default"), (["render", "-n", "team-a"], "team-a")):
        code, out, err = run([*argv, str(f)], capsys)
        assert code == 0 and err == "", "the Binding is found in the same namespace"
        pods = [d for d in yamlio.load_documents(out) if d["kind"] == "Pod"]
        assert {p["metadata"]["namespace"] for p in pods} == {namespace}
        assert "--kv-transfer-config" in out
    code, out, _ = run(["admit", "--namespace", "team-a", str(f)], capsys)
    assert code == 0 and yamlio.load_documents(out)[0]["warnings"] == []


@pytest.mark.parametrize("verb", ["render", "admit", "explain"])
def test_namespace_flag_refuses_an_object_in_another_namespace(
    verb: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # kubectl: "the namespace from the provided object does not match the namespace"
    code, out, err = run([verb, "-n", "team-b", str(EXAMPLE)], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "qwen-chat.yaml: document 1: ModelDeployment qwen-chat names the namespace" in err
    assert "'team-a', not 'team-b'" in err
    code, _, err = run([verb, "-n", "team-a", str(EXAMPLE)], capsys)
    assert code == 0 and "does not match" not in err


def _every_parser(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found.extend(_every_parser(sub))
    return found


@pytest.mark.parametrize(
    "parser",
    [
        pytest.param(build_parser(), id="gpustack-render"),
        pytest.param(controller_main._parser(), id="gpustack-controller"),
        pytest.param(webhook_main.parser(), id="gpustack-webhook"),
    ],
)
def test_every_flag_has_help(parser: argparse.ArgumentParser) -> None:
    missing = [
        f"{p.prog} {'/'.join(a.option_strings) or a.dest}"
        for p in _every_parser(parser)
        for a in p._actions
        if not isinstance(a, argparse._SubParsersAction) and not a.help
    ]
    assert missing == []


def test_completion_script_names_every_verb_flag_and_choice() -> None:
    text = script(build_parser(), shell="bash")
    for p in _every_parser(build_parser()):
        for action in p._actions:
            for flag in action.option_strings:
                assert flag in text, flag
            for choice in action.choices or ():
                assert str(choice) in text, choice


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_completion_script_completes_in_bash(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["completion", "bash"], capsys)
    assert code == 0
    probe = (
        out + "COMP_WORDS=(gpustack-render render --val); COMP_CWORD=2; _gpustack_render; "
        'echo "${COMPREPLY[*]}"\n'
        'COMP_WORDS=(gpustack-render render -o ""); COMP_CWORD=3; _gpustack_render; '
        'echo "${COMPREPLY[*]}"\n'
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["--validate", "yaml json name"]


def test_every_verb_is_a_module_of_its_own() -> None:
    """The entry point loads the verb called by name: each verb of the parser has its module
    in gpustack_render/cli/verbs with ``run``, and each module there is a verb."""
    (verbs,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    folder = ROOT / "gpustack_render" / "cli" / "verbs"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert modules == set(verbs.choices)
    for verb in verbs.choices:
        assert callable(cli.command(verb))


def test_console_scripts_name_the_three_entry_points() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == {"gpustack-render", "gpustack-controller", "gpustack-webhook"}
    for target in scripts.values():
        module, _, func = target.partition(":")
        assert callable(getattr(import_module(module), func))


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["gpustack_controller", "--log-level", "bogus"], id="controller-log-level"),
        pytest.param(
            ["gpustack_controller", "--kubeconfig", "/no/such"], id="controller-kubeconfig"
        ),
        pytest.param(
            ["gpustack_webhook", "--cert-file=c", "--key-file=k", "--log-level", "bogus"],
            id="webhook-log-level",
        ),
        pytest.param(
            ["gpustack_webhook", "--cert-file=c", "--key-file=k", "--kubeconfig", "/no/such"],
            id="webhook-kubeconfig",
        ),
        pytest.param(["gpustack_webhook"], id="webhook-no-certificate-flags"),
    ],
)
def test_bad_flags_of_the_shells_are_one_line_and_exit_2(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", *argv], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("shell", ["gpustack_controller", "gpustack_webhook"])
@pytest.mark.parametrize("kubeconfig", ["none", "not-a-kubeconfig", "no-current-context"])
def test_no_usable_cluster_configuration_is_one_line_and_exit_2(
    shell: str, kubeconfig: str, tmp_path: Path
) -> None:
    """Out of a cluster with no kubeconfig, or with a file that is not one: one line naming the
    problem, exit 2, before any server starts."""
    cert, key = write_pair(tmp_path / "tls", "localhost")
    argv = (
        [sys.executable, "-m", shell, "--health-port=0"]
        if shell == "gpustack_controller"
        else [sys.executable, "-m", shell, f"--cert-file={cert}", f"--key-file={key}"]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUBE", "KUBERNETES_"))}
    env["HOME"] = str(tmp_path)
    if kubeconfig != "none":
        path = tmp_path / "kubeconfig"
        path.write_text("hello\n" if kubeconfig == "not-a-kubeconfig" else "kind: Config\n")
        argv.append(f"--kubeconfig={path}")
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60, env=env)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert "kubeconfig" in done.stderr


class _FullDisk(io.StringIO):
    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.parametrize(
    "argv", [["render", str(EXAMPLE)], ["crds"], ["--version"]], ids=["render", "crds", "version"]
)
def test_output_that_cannot_be_written_is_one_line_not_a_bug(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for stdout, cause in ((_FullDisk(), "No space left on device"), (None, "closed")):
        monkeypatch.setattr(sys, "stdout", stdout)
        code, _, err = run(argv, capsys)
        assert code == 2 and err.count("\n") == 1, err
        assert err.startswith("gpustack-render: cannot write the output: ") and cause in err
