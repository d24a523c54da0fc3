"""Every citation points into docs/contract/: the checker and the rewriter in hack/."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), ROOT / "hack" / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


check = _load("check-citations.py")
rewrite = _load("rewrite-citations.py")

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
    (contract / "decisions.md").write_text(CONTRACT_DECISIONS)
    (contract / "model-deployment.md").write_text(SEED)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _problems(root: Path) -> list[str]:
    return [f"{b.path}:{b.line}: {b.problem}" for b in check.check(root)]


def test_the_repository_resolves_every_citation_once_rewritten(tmp_path: Path) -> None:
    """What the integrator runs after merging: rewrite, then check. Both must come out clean."""
    copy = tmp_path / "repo"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*_cache", ".cluster"),
    )
    assert rewrite.main(["--root", str(copy)]) == 0
    assert _problems(copy) == []
    assert rewrite.main(["--root", str(copy), "--check"]) == 0, "the rewrite is not idempotent"


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
        pytest.param("see ../shared/spec/x\n", "refers to ../shared", id="shared"),
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
        CONTRACT_RENDER + "\nSee decisions.md D1; §17.2.\n"
    )
    assert _problems(root) == []


def test_command_line_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _mini_repo(tmp_path, {"README.md": "ok: render.md §1\nbad: render.md §2\n"})
    assert check.main(["--root", str(root)]) == 1
    assert capsys.readouterr().out == "README.md:2: docs/contract/render.md has no section §2\n"
    (root / "README.md").write_text("ok: render.md §1\n")
    assert check.main(["--root", str(root)]) == 0


@pytest.mark.parametrize(
    ("before", "after"),
    [
        pytest.param("render.md §17.2", "docs/contract/render.md §17.2", id="short"),
        pytest.param(
            "``reference/admission.md`` §3", "``docs/contract/admission.md`` §3", id="ref"
        ),
        pytest.param("api.md §11.4", "docs/contract/api-notes.md §11.4", id="api-notes"),
        pytest.param("docs/api.md", "docs/api.md", id="generated-api-doc-kept"),
        pytest.param('Path("docs") / "api.md"', 'Path("docs") / "api.md"', id="literal-kept"),
        pytest.param("python-api.md", "python-api.md", id="other-file-kept"),
        pytest.param("DECISIONS.md D1", "docs/contract/decisions.md D1", id="decisions"),
        pytest.param("(`../shared/spec/`)", "(`docs/contract/`)", id="shared-dir"),
        pytest.param(
            "../shared/spec/reference/kv-injection.md", "docs/contract/kv-injection.md", id="shared"
        ),
        pytest.param("../shared/conventions.md", "docs/contract/conventions.md", id="conventions"),
        pytest.param("D20 and the seed", "D20 and the seed", id="decision-ids-kept"),
    ],
)
def test_rewrite_text(before: str, after: str) -> None:
    assert rewrite.rewrite_text(before) == after
    assert rewrite.rewrite_text(after) == after


def test_rewrite_python_touches_only_comments_and_docstrings_and_rewraps() -> None:
    source = "\n".join(
        [
            '"""Module (render.md §1).',
            "",
            "- a list item whose text runs long enough to overflow once the citation render.md §17"
            " grows,",
            "  and continues here.",
            '"""',
            "",
            'MESSAGE = "render.md §1 is data"',
            "#: A constant whose comment is almost exactly as long as the limit allows"
            " (render.md §17).",
            "X = 1  # a trailing comment that also becomes much too long after the rewrite:"
            " render.md §17",
            "# --- section (render.md §17) ------------------------------------------------------",
            "",
        ]
    )
    out = rewrite.rewrite_python(source)
    compile(out, "<rewritten>", "exec")
    assert 'MESSAGE = "render.md §1 is data"' in out
    assert all(len(line) <= rewrite.LIMIT for line in out.splitlines()), out
    assert "  grows, and continues here." in out  # the overflow joins the list item's next line
    assert "# a trailing comment that also becomes much too long" in out
    assert "\nX = 1\n" in out
    assert out.count("docs/contract/render.md") == 5
    assert rewrite.rewrite_python(out) == out
