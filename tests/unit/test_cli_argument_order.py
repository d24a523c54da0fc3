"""Options and operands in any order, as kubectl takes them (issue 37, item 1).

Every verb reads a file named after an option (``explain md/qwen-chat -n team-a edited.yaml``,
the README's own live form; ``render a.yaml -n team-a b.yaml``) as it reads one named before; an
option the verb does not have is still refused with exit 2, under the verb's usage (not the
top level's, which hid the cause).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli import yamlio
from gpustack_render.cli.parser import build_parser

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "qwen-chat.yaml"
POD_CASE = ROOT / "golden" / "inject-command-only" / "input.yaml"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exc:  # argparse's own exits (usage, --help)
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _parsed(argv: list[str]) -> dict[str, object]:
    return vars(build_parser().parse_args(argv))


#: Per verb: its operands and its options, each option with its value (in the order a person
#: might type them); every interleaving below parses to the same arguments.
ORDERS: dict[str, tuple[list[str], list[list[str]]]] = {
    "render": (
        ["a.yaml", "b.yaml"],
        [["-n", "team-a"], ["-o", "json"], ["--validate=warn"], ["--old", "s.yaml"], ["-R"]],
    ),
    "admit": (
        ["a.yaml", "b.yaml"],
        [["-n", "team-a"], ["--old", "s.yaml"], ["--operation", "UPDATE"], ["--print", "object"]],
    ),
    "inject": (
        ["pod.yaml", "inputs.yaml"],
        [["-n", "team-a"], ["--old", "s.yaml"], ["--operation", "UPDATE"], ["-o", "json"]],
    ),
    "explain": (
        ["md/qwen-chat", "edited.yaml"],
        [
            ["-n", "team-a"],
            ["--fail-on", "roll"],
            ["--replicas", "server=3"],
            ["--max-replaced", "0"],
            ["--kubeconfig", "k"],
            ["-o", "json"],
        ],
    ),
    "crds": ([], [["-o", "json"]]),
    "completion": (["bash"], []),
}


def _interleavings(operands: list[str], options: list[list[str]]) -> list[list[str]]:
    """Options all before, all after, and each one between every two operands."""
    flat = [word for option in options for word in option]
    orders = [[*flat, *operands], [*operands, *flat]]
    for cut in range(1, len(operands)):
        orders.append([*operands[:cut], *flat, *operands[cut:]])
        for option in options:
            rest = [w for o in options if o is not option for w in o]
            orders.append([*rest, *operands[:cut], *option, *operands[cut:]])
    return orders


@pytest.mark.parametrize("verb", list(ORDERS))
def test_every_verb_takes_its_options_and_operands_in_any_order(verb: str) -> None:
    operands, options = ORDERS[verb]
    orders = _interleavings(operands, options)
    assert len(orders) >= 2
    first = _parsed([verb, *orders[0]])
    for order in orders[1:]:
        assert _parsed([verb, *order]) == first, order
    if operands:
        assert first["files" if verb != "completion" else "shell"] in (operands, operands[0])


def test_the_verbs_of_the_parser_are_the_verbs_above() -> None:
    (verbs,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert set(verbs.choices) == set(ORDERS)


def test_render_reads_a_file_named_after_an_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``render a.yaml -n team-a b.yaml``: the deployment in one file, its inputs in another,
    ``-n`` between them; the same manifests as with ``-n`` first."""
    deployment, *inputs = yamlio.load_documents(EXAMPLE.read_text())
    for doc in (deployment, *inputs):
        doc["metadata"].pop("namespace", None)
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(yamlio.dump_yaml([deployment]))
    b.write_text(yamlio.dump_yaml(inputs))
    expected = run(["render", "-n", "team-a", str(a), str(b)], capsys)
    assert expected[0] == 0, expected[2]
    assert run(["render", str(a), "-n", "team-a", str(b)], capsys) == expected
    assert run(["render", str(a), str(b), "-n", "team-a"], capsys) == expected


def test_the_readme_live_form_gets_past_the_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``explain md/qwen-chat -n team-a edited.yaml`` reads its arguments and goes on to the
    cluster: here there is none (no kubeconfig), so it stops there, exit 2 with that cause."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / "edited.yaml").write_text(EXAMPLE.read_text().split("---")[0])
    code, out, err = run(["explain", "md/qwen-chat", "-n", "team-a", "edited.yaml"], capsys)
    assert (code, out) == (2, "")
    assert err == (
        f"gpustack-render: explain: no kubeconfig: {tmp_path}/.kube/config does not exist "
        "(pass --kubeconfig PATH)\n"
    )


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["render", "{EXAMPLE}", "--bogus", "{EXAMPLE}"], id="render"),
        pytest.param(["admit", "--bogus=1", "{EXAMPLE}"], id="admit"),
        pytest.param(["inject", "{POD}", "--bogus"], id="inject"),
        pytest.param(["explain", "md/qwen-chat", "-n", "team-a", "--bogus"], id="explain"),
        pytest.param(["crds", "--bogus"], id="crds"),
        pytest.param(["completion", "bash", "--bogus"], id="completion"),
    ],
)
def test_an_unknown_option_is_refused_under_the_verbs_usage(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [a.replace("{EXAMPLE}", str(EXAMPLE)).replace("{POD}", str(POD_CASE)) for a in argv]
    verb = argv[0]
    code, out, err = run(argv, capsys)
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: gpustack-render {verb} [-h]"), err
    bogus = next(a for a in argv if a.startswith("--bogus"))
    assert err.endswith(f"gpustack-render {verb}: error: unrecognized arguments: {bogus}\n")


def test_an_extra_operand_of_completion_is_refused_under_its_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["completion", "bash", "zsh"], capsys)
    assert code == 2 and err.startswith("usage: gpustack-render completion")
    assert err.endswith("gpustack-render completion: error: unrecognized arguments: zsh\n")


def test_what_comes_before_the_verb_is_still_the_top_levels(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = run(["--bogus", "render"], capsys)
    assert code == 2 and err.startswith("usage: gpustack-render [-h] [--version] VERB")
    code, _, err = run(["frobnicate"], capsys)
    assert code == 2 and "invalid choice: 'frobnicate'" in err


def test_a_double_dash_still_ends_the_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """After ``--`` a word starting with '-' is a file, as in kubectl and every POSIX tool."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-odd.yaml").write_text(EXAMPLE.read_text())
    expected = run(["render", "-o", "name", str(EXAMPLE)], capsys)
    assert run(["render", "-o", "name", "--", "-odd.yaml"], capsys) == expected
