"""docs/operations.md keeps up with the two servers' flags and the chart's values.

Every long flag of ``gpustack-controller`` and ``gpustack-webhook`` is named on the page, a
value the page's synopsis gives a flag is that flag's default, and each flag with a default
says it in ``--help``. Every value of ``charts/gpustack-render/values.yaml`` is in the page's
values table, and the table names no value the chart does not have.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustack_controller import __main__ as controller_main
from gpustack_webhook import __main__ as webhook_main

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
VALUES = ROOT / "charts" / "gpustack-render" / "values.yaml"

PARSERS = {
    "gpustack_controller": controller_main._parser,
    "gpustack_webhook": webhook_main.parser,
}


def _options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.option_strings and a.dest != "help"]


def _synopsis(module: str) -> str:
    """The ``python -m MODULE …`` synopsis of the page, up to its closing backtick."""
    text = OPERATIONS.read_text()
    start = text.index(f"`python -m {module} ")
    return text[start + 1 : text.index("`", start + 1)]


@pytest.mark.parametrize("module", sorted(PARSERS))
def test_every_server_flag_is_on_the_page(module: str) -> None:
    text = OPERATIONS.read_text()
    missing = [
        flag
        for action in _options(PARSERS[module]())
        for flag in action.option_strings
        if flag.startswith("--") and flag not in text
    ]
    assert missing == [], f"docs/operations.md does not name {module}'s {missing}"


@pytest.mark.parametrize("module", sorted(PARSERS))
def test_the_synopsis_shows_the_defaults(module: str) -> None:
    """``[--workers 8]`` reads as the default: it must be one (a placeholder is in capitals)."""
    by_flag = {f: a for a in _options(PARSERS[module]()) for f in a.option_strings}
    shown = re.findall(r"\[(--[a-z-]+) ([^\]\sA-Z][^\]\s]*)\]", _synopsis(module))
    assert shown, f"no [--flag value] in the synopsis of {module}"
    for flag, value in shown:
        assert flag in by_flag, f"the synopsis of {module} shows an unknown flag {flag}"
        assert str(by_flag[flag].default) == value, (flag, value, by_flag[flag].default)


@pytest.mark.parametrize("module", sorted(PARSERS))
def test_every_server_flag_with_a_default_says_it_in_help(module: str) -> None:
    silent = [
        action.option_strings[-1]
        for action in _options(PARSERS[module]())
        if action.default not in (None, "", [], False) and "default" not in (action.help or "")
    ]
    assert silent == [], f"{module} --help does not give the default of {silent}"


def _leaves(values: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of the values, stopping at ``settings`` (its keys are the Settings')."""
    found = []
    for key, value in values.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value and key != "settings":
            found.extend(_leaves(value, f"{path}."))
        else:
            found.append(path)
    return found


def _table_names(top: set[str]) -> set[str]:
    """The values the page's values table names: every name of its first column (``a.*`` and
    ``*.b`` included), and any dotted name under a top-level value elsewhere in a row."""
    text = OPERATIONS.read_text()
    table = text[text.index("| Value | Default | Meaning |") :]
    table = table[: table.index("\n\n")]
    names = set()
    for row in table.splitlines()[2:]:
        cells = row.split("|")
        names.update(re.findall(r"`([A-Za-z*][\w.*]*)`", cells[1]))
        names.update(
            name
            for name in re.findall(r"`([A-Za-z][\w.*]*)`", row)
            if name.partition(".")[0] in top and "." in name
        )
    return names


def _covers(name: str, path: str) -> bool:
    if name.startswith("*."):
        return path.endswith(name[1:])
    if name.endswith(".*"):
        return path == name[:-2] or path.startswith(name[:-1])
    return path == name or path.startswith(f"{name}.")


def test_every_chart_value_is_in_the_values_table() -> None:
    values = yaml.safe_load(VALUES.read_text())
    names = _table_names(set(values))
    leaves = _leaves(values)
    missing = [p for p in leaves if not any(_covers(n, p) for n in names)]
    assert missing == [], f"docs/operations.md's values table does not name {missing}"
    unknown = sorted(n for n in names if not any(_covers(n, p) for p in leaves))
    assert unknown == [], f"the values table names values the chart does not have: {unknown}"
