"""Launch recognition (docs/contract/injection-notes.md §7): transparent launchers, shells, scripts,
programs."""

from __future__ import annotations

import pytest

from gpustack_render.core.vocabulary import Engine
from gpustack_render.injection.launch import Launch, check_launch, python_module, strip_launchers
from gpustack_render.injection.refusal import Refusal

SG = ["python3", "-m", "sglang.launch_server"]


def launch(
    command: list[str],
    args: list[str] | None = None,
    *,
    engine: str = "vllm",
    fwd: str | None = None,
) -> Launch | Refusal:
    return check_launch("server", command, args or [], engine=Engine(engine), forwarded=fwd)


ADMITTED = [
    pytest.param(["vllm"], ["serve", "m"], "vllm", None, "vllm", False, id="vllm-direct"),
    pytest.param(["/usr/local/bin/vllm"], ["serve"], "vllm", None, "vllm", False, id="vllm-path"),
    pytest.param(["vllm", "serve"], [], "vllm-ascend", None, "vllm", False, id="vllm-ascend"),
    pytest.param(SG, ["--model-path", "m"], "sglang", None, "python3", False, id="sglang-module"),
    pytest.param(
        ["/usr/bin/python3", "-u", "-m", "sglang.launch_server"],
        [],
        "sglang",
        None,
        "python3",
        False,
        id="sglang-interpreter-flag",
    ),
    pytest.param(
        ["python3", "-msglang.launch_server"],
        [],
        "sglang",
        None,
        "python3",
        False,
        id="sglang-attached-module",
    ),
    pytest.param(
        ["python3", "-um", "sglang.launch_server"],
        [],
        "sglang",
        None,
        "python3",
        False,
        id="sglang-bundled-m",
    ),
    pytest.param(
        ["python3", "-W", "ignore", "-m", "sglang.launch_server"],
        [],
        "sglang",
        None,
        "python3",
        False,
        id="sglang-W-value",
    ),
    pytest.param(["env", "FOO=1", "vllm"], [], "vllm", None, "vllm", False, id="env-assignment"),
    pytest.param(["env", "-u", "FOO", "vllm"], [], "vllm", None, "vllm", False, id="env-u-split"),
    pytest.param(["env", "-uFOO", "vllm"], [], "vllm", None, "vllm", False, id="env-u-attached"),
    pytest.param(["env", "-vu", "FOO", "vllm"], [], "vllm", None, "vllm", False, id="env-bundle-u"),
    pytest.param(
        ["env", "--unset=FOO", "vllm"], [], "vllm", None, "vllm", False, id="env-unset-eq"
    ),
    pytest.param(
        ["env", "--unset", "FOO", "vllm"], [], "vllm", None, "vllm", False, id="env-unset-split"
    ),
    pytest.param(
        ["env", "--chdir", "/w", "-a", "x", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="env-chdir-argv0",
    ),
    pytest.param(["env", "-0", "vllm"], [], "vllm", None, "vllm", False, id="env-flag"),
    pytest.param(["env", "--", "vllm"], [], "vllm", None, "vllm", False, id="env-double-dash"),
    pytest.param(["env", "-S", "", "vllm"], [], "vllm", None, "vllm", False, id="env-S-empty-next"),
    pytest.param(
        ["env", "-vS", "", "vllm"], [], "vllm", None, "vllm", False, id="env-bundle-S-empty-next"
    ),
    pytest.param(
        ["env", "--split-string=", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="env-split-string-empty-inline",
    ),
    pytest.param(
        ["env", "--split-string", "", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="env-split-string-empty-next",
    ),
    pytest.param(["tini", "--", "vllm"], [], "vllm", None, "vllm", False, id="tini"),
    pytest.param(
        ["/sbin/tini", "-s", "-p", "SIGTERM", "--", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="tini-options",
    ),
    pytest.param(["tini", "-e", "143", "vllm"], [], "vllm", None, "vllm", False, id="tini-e"),
    pytest.param(
        ["dumb-init", "--rewrite", "15:2", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="dumb-init-rewrite",
    ),
    pytest.param(
        ["dumb-init", "-r", "15:2", "--single-child", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="dumb-init-r",
    ),
    pytest.param(["busybox", "env", "vllm"], [], "vllm", None, "vllm", False, id="busybox-applet"),
    pytest.param(
        ["toybox", "timeout", "10", "vllm"], [], "vllm", None, "vllm", False, id="toybox-timeout"
    ),
    pytest.param(["timeout", "10", "vllm"], [], "vllm", None, "vllm", False, id="timeout"),
    pytest.param(
        ["timeout", "-s", "KILL", "1h", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="timeout-signal",
    ),
    pytest.param(
        ["timeout", "-k5", "10", "vllm"], [], "vllm", None, "vllm", False, id="timeout-k-attached"
    ),
    pytest.param(
        ["timeout", "--kill-after=5", "10", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="timeout-kill-after-eq",
    ),
    pytest.param(
        ["timeout", "--kill", "5", "10", "vllm"],
        [],
        "vllm",
        None,
        "vllm",
        False,
        id="timeout-long-abbreviation",
    ),
    pytest.param(
        ["tini", "--", "env", "-u", "X", "timeout", "30m"],
        ["vllm", "serve"],
        "vllm",
        None,
        "vllm",
        False,
        id="nested-launchers-into-args",
    ),
    pytest.param(["vllm"], [], "vllm", "true", "vllm", False, id="recognised-declared"),
    pytest.param(["entrypoint"], [], "vllm", "true", "entrypoint", True, id="declared-wrapper"),
    pytest.param([], ["serve"], "vllm", "true", "", True, id="declared-args-only"),
    pytest.param(["env", "-S", "vllm serve"], [], "vllm", "true", "", True, id="declared-hidden"),
    pytest.param(
        ["env", "-S", "FOO='a b' vllm serve"],
        [],
        "vllm",
        "true",
        "",
        True,
        id="declared-S-other-var",
    ),
    pytest.param(["./run.sh"], [], "vllm", "true", "run.sh", True, id="declared-script"),
    pytest.param(
        ["bash", "/app/run.sh"], [], "vllm", "true", "bash", True, id="declared-shell-script"
    ),
    pytest.param(
        ["sh", "/app/start"], [], "sglang", "true", "sh", True, id="declared-shell-command-file"
    ),
]


@pytest.mark.parametrize(("command", "args", "engine", "fwd", "program", "forwarded"), ADMITTED)
def test_admitted(
    command: list[str],
    args: list[str],
    engine: str,
    fwd: str | None,
    program: str,
    forwarded: bool,
) -> None:
    assert launch(command, args, engine=engine, fwd=fwd) == Launch(program, forwarded)


REFUSED = [
    pytest.param([], [], "vllm", None, "launch.no-command", id="launch.no-command-nothing"),
    pytest.param([], [], "vllm", "true", "launch.no-command", id="launch.no-command-declared"),
    pytest.param(
        ["vllm"], [], "vllm", "yes", "launch.forwarding-value", id="launch.forwarding-value-yes"
    ),
    pytest.param(
        ["vllm"], [], "vllm", "True", "launch.forwarding-value", id="launch.forwarding-value-case"
    ),
    pytest.param(
        ["vllm"], [], "vllm", "", "launch.forwarding-value", id="launch.forwarding-value-empty"
    ),
    # launch.env-owned-variable: env changing a KV-cache variable at exec time; a forwarding
    # declaration is about arguments, so it never admits one.
    pytest.param(
        ["env", "MOONCAKE_TENANT_ID=team-b-chat", *SG],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-assign",
    ),
    pytest.param(
        ["/usr/bin/env", "MOONCAKE_TENANT_ID=b", *SG],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-path",
    ),
    pytest.param(
        ["env", "-i", "vllm"],
        [],
        "vllm",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-i",
    ),
    pytest.param(
        ["env", "-", "vllm"],
        [],
        "vllm",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-lone-dash",
    ),
    pytest.param(
        ["env", "-iu", "FOO", "vllm"],
        [],
        "vllm",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-bundle-i",
    ),
    pytest.param(
        ["env", "--ignore-env", "vllm"],
        [],
        "vllm",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-long-i",
    ),
    pytest.param(
        ["env", "-iS", "vllm serve"],
        [],
        "vllm",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-before-A4",
    ),
    pytest.param(
        ["env", "-u", "MOONCAKE_TENANT_ID", *SG],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-u",
    ),
    pytest.param(
        ["env", "MOONCAKE_CONFIG_PATH=/x", "vllm"],
        [],
        "vllm",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-vllm",
    ),
    pytest.param(
        ["env", "-u", "MOONCAKE_CONFIG_PATH", "vllm"],
        [],
        "vllm",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-u-declared",
    ),
    pytest.param(
        ["env", "-uMOONCAKE_CONFIG_PATH", "vllm"],
        [],
        "vllm",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-u-attached",
    ),
    pytest.param(
        ["env", "--unset=SGLANG_HICACHE_MOONCAKE_CONFIG_PATH", *SG],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-unset-eq",
    ),
    pytest.param(
        ["tini", "--", "env", "MOONCAKE_MASTER=x:1", *SG],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-tini",
    ),
    # launch.env-owned-variable inside an env -S string: the command line is hidden, its
    # environment effects are not, and the forwarding declaration does not admit them either.
    pytest.param(
        ["env", "-S", "MOONCAKE_TENANT_ID=team-b-chat python3 -m sglang.launch_server"],
        [],
        "sglang",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-in-S-declared",
    ),
    pytest.param(
        ["env", "--split-string=-u MOONCAKE_CONFIG_PATH vllm serve"],
        [],
        "vllm",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-in-split-string-unset",
    ),
    pytest.param(
        ["env", "-S'MOONCAKE_MASTER=x:1' python3", "-m", "sglang.launch_server"],
        [],
        "sglang",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-in-S-attached-quoted",
    ),
    pytest.param(
        ["env", "-S", "-S 'MOONCAKE_TENANT_ID=b python3 -m sglang.launch_server'"],
        [],
        "sglang",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-in-nested-S",
    ),
    pytest.param(
        ["env", "-S", "MOONCAKE_TENANT_ID=b python3 -m sglang.launch_server"],
        [],
        "sglang",
        None,
        "launch.env-owned-variable",
        id="launch.env-owned-variable-in-S-before-A4",
    ),
    pytest.param(
        ["env", "-S", "-i vllm serve"],
        [],
        "vllm",
        "true",
        "launch.env-owned-variable",
        id="launch.env-owned-variable-S-i",
    ),
    pytest.param(
        ["env", "-S" + "-S" * 5000],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="S-nested-deeply-no-crash",
    ),
    pytest.param(
        [],
        ["vllm", "serve"],
        "vllm",
        None,
        "launch.args-without-command",
        id="launch.args-without-command-args-only",
    ),
    pytest.param(
        ["env", "-S", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-S-split",
    ),
    pytest.param(
        ["env", "-Svllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-S-attached",
    ),
    pytest.param(
        ["env", "-vS", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-bundle",
    ),
    pytest.param(
        ["env", "--split-string=vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-long-eq",
    ),
    pytest.param(
        ["env", "--split-string", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-long-split",
    ),
    pytest.param(
        ["env", "--split", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-abbreviated",
    ),
    pytest.param(
        ["busybox", "env", "-S", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.hidden-command-line",
        id="launch.hidden-command-line-through-busybox",
    ),
    pytest.param(
        ["sh", "-c", "vllm serve"], [], "vllm", None, "launch.shell-c", id="launch.shell-c-sh-c"
    ),
    pytest.param(
        ["/bin/bash", "-lc", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.shell-c",
        id="launch.shell-c-bash-lc",
    ),
    pytest.param(
        ["bash", "-euc", "vllm serve"],
        [],
        "vllm",
        None,
        "launch.shell-c",
        id="launch.shell-c-bundle",
    ),
    pytest.param(
        ["bash", "-o", "pipefail", "-c", "x"],
        [],
        "vllm",
        None,
        "launch.shell-c",
        id="launch.shell-c-after-o",
    ),
    pytest.param(
        ["sh", "-c", "x"], [], "vllm", "true", "launch.shell-c", id="launch.shell-c-declared"
    ),
    pytest.param(
        ["tini", "--", "bash", "-c", "x"],
        [],
        "vllm",
        None,
        "launch.shell-c",
        id="launch.shell-c-after-tini",
    ),
    pytest.param(["./run.sh"], [], "vllm", None, "launch.script", id="launch.script-program"),
    pytest.param(
        ["/app/start.sh", "serve"],
        [],
        "sglang",
        None,
        "launch.script",
        id="launch.script-program-path",
    ),
    pytest.param(
        ["sh", "/app/run.sh"], [], "vllm", None, "launch.script", id="launch.script-shell-file"
    ),
    pytest.param(
        ["bash", "--", "run.sh"],
        [],
        "vllm",
        None,
        "launch.script",
        id="launch.script-after-double-dash",
    ),
    pytest.param(
        ["bash", "-x", "-o", "errexit", "run.sh"],
        [],
        "vllm",
        None,
        "launch.script",
        id="launch.script-after-options",
    ),
    pytest.param(
        ["tini", "--"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-tini-dashdash",
    ),
    pytest.param(
        ["tini", "--"],
        [],
        "vllm",
        "true",
        "launch.nothing-to-run",
        id="launch.nothing-to-run-declared",
    ),
    pytest.param(
        ["tini"], [], "vllm", None, "launch.nothing-to-run", id="launch.nothing-to-run-tini"
    ),
    pytest.param(
        ["env", "FOO=1"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-env-assignment",
    ),
    pytest.param(
        ["timeout", "10"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-timeout-duration",
    ),
    pytest.param(
        ["timeout"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-timeout-no-operand",
    ),
    pytest.param(
        ["env", "-u"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-missing-option-value",
    ),
    pytest.param(
        ["env", "-S"],
        [],
        "vllm",
        None,
        "launch.nothing-to-run",
        id="launch.nothing-to-run-opaque-nothing-after",
    ),
    pytest.param(
        ["busybox"], [], "vllm", None, "launch.nothing-to-run", id="launch.nothing-to-run-busybox"
    ),
    pytest.param(
        ["vllm"],
        [],
        "sglang",
        None,
        "launch.other-engine",
        id="launch.other-engine-vllm-for-sglang",
    ),
    pytest.param(
        SG, [], "vllm", None, "launch.other-engine", id="launch.other-engine-sglang-for-vllm"
    ),
    pytest.param(
        SG, [], "vllm-ascend", "true", "launch.other-engine", id="launch.other-engine-declared"
    ),
    pytest.param(
        ["python", "-m", "sglang.launch_server"],
        [],
        "sglang",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-python",
    ),
    pytest.param(
        ["python3.11", "-m", "sglang.launch_server"],
        [],
        "sglang",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-python3x",
    ),
    pytest.param(
        ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-vllm-module",
    ),
    pytest.param(
        ["python3", "-c", "import sglang"],
        [],
        "sglang",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-python-c",
    ),
    pytest.param(
        ["sglang"],
        [],
        "sglang",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-sglang-binary",
    ),
    pytest.param(
        ["entrypoint"], [], "vllm", None, "launch.unrecognised", id="launch.unrecognised-entrypoint"
    ),
    pytest.param(["run"], [], "vllm", None, "launch.unrecognised", id="launch.unrecognised-run"),
    pytest.param(
        ["gosu", "app", "vllm"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-gosu",
    ),
    pytest.param(
        ["chroot", "/", "vllm"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-chroot",
    ),
    pytest.param(
        ["setsid", "vllm"], [], "vllm", None, "launch.unrecognised", id="launch.unrecognised-setsid"
    ),
    pytest.param(
        ["timeout", "10", "-x", "vllm"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-options-end-at-operand",
    ),
    pytest.param(
        ["bash", "start", "-c", "x"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-c-after-command-file",
    ),
    pytest.param(
        ["bash", "--rcfile", "x.sh", "start"],
        [],
        "vllm",
        None,
        "launch.unrecognised",
        id="launch.unrecognised-rcfile-value-skipped",
    ),
]


@pytest.mark.parametrize(("command", "args", "engine", "fwd", "rule"), REFUSED)
def test_refused(
    command: list[str], args: list[str], engine: str, fwd: str | None, rule: str
) -> None:
    out = launch(command, args, engine=engine, fwd=fwd)
    assert isinstance(out, Refusal), out
    assert out.rule == rule, out.message
    if (
        rule != "launch.forwarding-value"
    ):  # launch.forwarding-value names the annotation, every other refusal the container
        assert "server" in out.message


@pytest.mark.parametrize(
    ("command", "names"),
    [
        pytest.param(
            ["tini", "--", "env"], ["env"], id="launch.nothing-to-run-names-last-launcher"
        ),
        pytest.param(
            ["bash", "-lc", "x"], ["bash", "-lc"], id="launch.shell-c-names-shell-and-option"
        ),
        pytest.param(["sh", "/app/run.sh"], ["run.sh"], id="launch.script-names-script-basename"),
        pytest.param(["gosu", "u", "vllm"], ["gosu"], id="launch.unrecognised-names-program"),
        pytest.param(SG, ["python3", "sglang", "vllm"], id="launch.other-engine-names-engines"),
    ],
)
def test_messages_name_the_facts(command: list[str], names: list[str]) -> None:
    out = launch(command)
    assert isinstance(out, Refusal)
    for name in names:
        assert name in out.message


def test_strip_reports_outcomes() -> None:
    assert strip_launchers(["env", "X=1", "vllm", "serve"]) == ("ok", ["vllm", "serve"], "env")
    assert strip_launchers(["env", "-S", "a b"]) == ("hidden", [], "env")
    assert strip_launchers(["tini", "--"]) == ("nothing", [], "tini")
    assert strip_launchers(["vllm"]) == ("ok", ["vllm"], "")


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["python3", "-m", "a.b"], "a.b"),
        (["python3", "-m"], None),
        (["python3", "script.py", "-m", "a"], None),
        (["python3", "-", "-m", "a"], None),
        (["python3", "--", "-m", "a"], None),
        (["python3", "-X", "dev", "-m", "a"], "a"),
        (["python3", "-Xdev", "-m", "a"], "a"),
    ],
)
def test_python_module(argv: list[str], module: str | None) -> None:
    assert python_module(argv) == module


@pytest.mark.parametrize(
    ("command", "engine"),
    [
        pytest.param(["env", "-" + "v" * 1_000_000, "vllm"], "vllm", id="env"),
        pytest.param(["tini", "-" + "v" * 1_000_000, "--", "vllm"], "vllm", id="tini"),
        pytest.param(
            ["python3", "-" + "u" * 1_000_000, "-m", "sglang.launch_server"], "sglang", id="python3"
        ),
        pytest.param(["tini", "--"] * 150_000 + ["vllm"], "vllm", id="launcher-chain"),
        pytest.param(["busybox"] * 150_000 + ["vllm"], "vllm", id="busybox-chain"),
    ],
)
def test_a_long_launch_is_read_in_linear_time(command: list[str], engine: str) -> None:
    """A hostile Pod may fill its 1.5 MB with one option bundle or a chain of launchers: it is
    still read to the engine (a slice per letter took ~10 s here, a copy of the argv per launcher
    ~40 s, past the API server's 10 s webhook timeout; bench/injection_hostile.py prints how long
    the whole review of each shape takes and fails when one is no longer linear)."""
    assert isinstance(launch(command, [], engine=engine, fwd=None), Launch)
