"""docs/rules.md lists every rule id the code can put in an ``origin``, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import gpustack_render
from gpustack_render.injection import refusal

ROOT = Path(__file__).parents[2]
PACKAGE = Path(gpustack_render.__file__).parent
ROW = re.compile(r"^\| `([^`]+)` \| (.+?) \| (`[^`]+`|\(same\)) \| (.+) \|$")


def _documented() -> dict[str, str]:
    rows = {}
    for line in (ROOT / "docs" / "rules.md").read_text().splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = match.group(2)
    return rows


def _in_code() -> set[str]:
    ids: set[str] = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        ids.update(re.findall(r'origin="([^"]+)"', text))
        ids.update(re.findall(r'^ORIGIN: Final = "([^"]+)"', text, re.M))
    ids.update(
        value
        for name, value in vars(refusal).items()
        if name.isupper() and isinstance(value, str) and "." in value
    )
    return ids


def test_every_rule_id_in_the_code_is_documented() -> None:
    assert _in_code() - set(_documented()) == set()


def test_every_documented_id_is_used_by_the_code() -> None:
    source = "\n".join(p.read_text() for p in PACKAGE.rglob("*.py"))
    unused = {i for i in _documented() if f'"{i}"' not in source}
    assert unused == set()


def test_every_golden_origin_is_documented() -> None:
    documented = set(_documented())
    seen = set()
    for path in (ROOT / "golden").glob("*/verdict.yaml"):
        seen.update(re.findall(r"^\s*origin: '?([^'\s]+)'?$", path.read_text(), re.M))
    assert seen and seen - documented == set()


def test_ids_read_subject_dot_rule() -> None:
    shape = re.compile(r"^[a-z][a-z0-9-]*\.[a-z][a-z0-9-]*$")
    assert [i for i in _documented() if not shape.match(i)] == []


def test_every_refused_injection_case_is_named_by_its_rule() -> None:
    """``golden/inject-refuse-<rule>[-<variant>]/``: the rule id with its ``inject.`` subject
    left out (the verb says it) and the dot as a dash, so ``inject.binding-terminating`` is
    ``inject-refuse-binding-terminating``, ``launch.shell-c`` ``inject-refuse-launch-shell-c``."""
    misnamed = {}
    cases = sorted((ROOT / "golden").glob("inject-refuse-*/verdict.yaml"))
    for path in cases:
        origin = re.search(r"^origin: '?([^'\s]+)'?$", path.read_text(), re.M)
        assert origin, f"{path.parent.name}: a refused case names its rule"
        subject, rule = origin.group(1).split(".")
        stem = "inject-refuse-" + (rule if subject == "inject" else f"{subject}-{rule}")
        name = path.parent.name
        if name != stem and not name.startswith(f"{stem}-"):
            misnamed[name] = origin.group(1)
    assert cases, "no refused injection case"
    assert misnamed == {}
