"""docs/cli.md keeps up with the parser: every verb and every long flag is described, and the
page says what CI users trip on (generateName, the status fields, the exit codes); its `--summary`
example is the line `render --summary` prints."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from gpustack_render.cli import __main__ as cli
from gpustack_render.cli.parser import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    found = {"": parser}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found.update(action.choices)
    return found


def test_every_verb_and_long_flag_is_documented() -> None:
    text = DOC.read_text()
    missing = []
    for verb, parser in _parsers().items():
        if verb and f"`{verb}" not in text:
            missing.append(verb)
        for action in parser._actions:
            missing.extend(
                f"{verb} {flag}"
                for flag in action.option_strings
                if flag.startswith("--") and flag != "--help" and flag not in text
            )
    assert missing == []


def test_the_page_says_what_ci_users_trip_on() -> None:
    text = DOC.read_text()
    for needle in (
        "generateName",
        "kubectl create",
        "status.entrance",
        "QuotaGranted",
        "status.clientEndpoint",
        "## Exit codes",
        "--validate=strict",
    ):
        assert needle in text, needle


def test_old_names_only_the_operations_the_verb_takes() -> None:
    """``--old``'s help names the operations it is for; ``inject`` takes no DELETE."""
    for verb in ("admit", "inject"):
        actions = {a.dest: a for a in _parsers()[verb]._actions}
        named = set(re.findall(r"[A-Z]{6}", actions["old"].help or ""))
        assert named and named <= set(actions["operation"].choices or ()), (verb, named)


def test_the_summary_line_shown_is_what_render_prints(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's ``--summary`` example (its tabs shown as two spaces) is the real line."""
    shown = re.search(r"`(examples/takeover\.yaml  [^`]*)`", DOC.read_text())
    assert shown is not None
    monkeypatch.chdir(DOC.parents[1])
    assert cli.main(["render", "--summary", "examples/takeover.yaml"]) == 0
    assert capsys.readouterr().out == shown.group(1).replace("  ", "\t") + "\n"
