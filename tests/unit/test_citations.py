"""Every citation points into docs/contract/ (hack/check-citations.py)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The forbidden path is spelled in parts, so this test does not itself read as a citation.
UP = "../"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "hack" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


check = _load("check-citations.py")

CONTRACT_RENDER = """# Rendering rules

## 1. Inputs

| Id | Rule |
|---|---|
| 4a | a row |
| R7 | a rule |

1. a step
2. another step

## 17. Connector documents

**17.2 vLLM `--kv-transfer-config`** text.
"""
CONTRACT_DECISIONS = "# Decisions\n\n## D1 API surface\n\ntext\n\n## D2 Images\n"
SEED = "# Model Deployment Configuration\n\n## Rollout behavior\n\n### Replica departures\n"


def _mini_repo(root: Path, files: dict[str, str]) -> Path:
    contract = root / "docs" / "contract"
    contract.mkdir(parents=True)
    (contract / "render.md").write_text(CONTRACT_RENDER)
    (contract / "spec-decisions.md").write_text(CONTRACT_DECISIONS)
    (contract / "model-deployment.md").write_text(SEED)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _problems(root: Path) -> list[str]:
    return [f"{b.path}:{b.line}: {b.problem}" for b in check.check(root)]


def test_the_repository_resolves_every_citation() -> None:
    """Every citation in the tree resolves in docs/contract/, and nothing cites the
    specification outside the repository."""
    assert _problems(ROOT) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param("see render.md §17.2 and §1.2\n", None, id="section-and-step"),
        pytest.param("(``reference/render.md`` §1, §17)\n", None, id="backticks-and-list"),
        pytest.param("docs/contract/render.md §1–§17\n", None, id="range"),
        pytest.param("render.md §1.4a, render.md R7\n", None, id="table-row-and-rule"),
        pytest.param("per D2; D1 too\n", None, id="decisions"),
        pytest.param('the seed\'s "Replica departures"\n', None, id="seed-section"),
        pytest.param("render.md §18\n", "docs/contract/render.md has no section §18", id="section"),
        pytest.param("render.md §17.3\n", "has no section §17.3", id="subsection"),
        pytest.param("render.md R9\n", "defines no rule R9", id="rule"),
        pytest.param("D3 says\n", "D3 is not a decision", id="decision"),
        pytest.param("admission.md §1\n", "docs/contract/admission.md does not exist", id="file"),
        pytest.param(f"see {UP}shared/x\n", f"refers to {UP}shared", id="shared"),
        pytest.param('the seed\'s "Rollout behaviour"\n', "is not a heading", id="seed-title"),
    ],
)
def test_checker_verdicts(tmp_path: Path, text: str, problem: str | None) -> None:
    root = _mini_repo(tmp_path, {"gpustack_render/mod.py": f"# {text}"})
    found = _problems(root)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith("gpustack_render/mod.py:1: "), found
        assert problem in found[0]


def test_a_bare_section_belongs_to_the_file_cited_above_it(tmp_path: Path) -> None:
    module = '"""Rules (render.md §1).\n\n§17.2 here, §5 broken.\n"""\n'
    root = _mini_repo(tmp_path, {"gpustack_render/mod.py": module})
    assert _problems(root) == [
        "gpustack_render/mod.py:3: docs/contract/render.md has no section §5"
    ]


def test_inside_the_contract_a_bare_section_is_the_file_itself(tmp_path: Path) -> None:
    root = _mini_repo(tmp_path, {})
    (root / "docs/contract/render.md").write_text(
        CONTRACT_RENDER + "\nSee spec-decisions.md D1; §17.2.\n"
    )
    assert _problems(root) == []


def test_command_line_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _mini_repo(tmp_path, {"README.md": "ok: render.md §1\nbad: render.md §2\n"})
    assert check.main(["--root", str(root)]) == 1
    assert capsys.readouterr().out == "README.md:2: docs/contract/render.md has no section §2\n"
    (root / "README.md").write_text("ok: render.md §1\n")
    assert check.main(["--root", str(root)]) == 0
