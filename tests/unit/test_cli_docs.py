"""docs/cli.md keeps up with the parser: every verb and every long flag is described, and the
page says what CI users trip on (generateName, the status fields, the exit codes)."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpustack_render.cli import commands as cli

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _parsers() -> dict[str, argparse.ArgumentParser]:
    parser = cli._parser()
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
