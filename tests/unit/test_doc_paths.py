"""Every module path the docs name exists.

A reader follows ``rendering/pods.py`` or ``gpustack_render.reconcile.rollout.plan`` from a doc
to the code; after a module moves, a stale name sends them nowhere. Scanned: ``README.md``, every
Markdown file under ``docs/`` and the docstrings and comments of the four packages. The
contract copy (``docs/contract/``) is scanned too, but it quotes the original product's code
(Go paths, ``pkg/...``), which none of the forms below matches: only the project's own paths
are checked there.

The forms, each resolved in the repository:

- a path under a package, ``gpustack_render/reconcile/status.py`` or a directory
  ``gpustack_controller/``;
- a path relative to the library, ``rendering/pods.py`` (its first part a subpackage of
  ``gpustack_render``), optionally followed by ``.name`` for something the module defines
  (``reconcile/teardown.plan_teardown``);
- a dotted name, ``gpustack_render.rendering.renderer`` or ``gpustack_render.api.ModelDeployment``:
  the longest prefix that is a module, then attributes of it;
- a bare module file, ``status.py``: some module of that name in one of the four packages;
- a path under another top-level directory of the repository (``tests/``, ``hack/``, ``bench/``,
  ``golden/``, ``docs/``, ``deploy/``, ``charts/``, ``examples/``), shell globs allowed.

A table whose first column is headed ``Before`` records an old layout: that column is history,
not a path to follow, and is skipped.
"""

from __future__ import annotations

import glob
import importlib
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gpustack_render", "gpustack_kube", "gpustack_controller", "gpustack_webhook")
SUBPACKAGES = sorted(
    p.name for p in (ROOT / "gpustack_render").iterdir() if (p / "__init__.py").is_file()
)
TOP_DIRS = ("tests", "hack", "bench", "golden", "docs", "deploy", "charts", "examples")

_LEFT = r"(?<![\w/.:~-])"
#: ``gpustack_render/reconcile/status.py``, ``gpustack_controller/``.
PACKAGE_PATH = re.compile(_LEFT + rf"((?:{'|'.join(PACKAGES)})(?:/\w+)*(?:/\w+\.py\b|/))(?![\w.-])")
#: ``rendering/pods.py``, ``reconcile/teardown.plan_teardown``.
LIBRARY_PATH = re.compile(
    _LEFT + rf"((?:{'|'.join(SUBPACKAGES)})(?:/\w+)*/\w+)(\.py\b|\.\w+)(?![\w/-])"
)
#: ``gpustack_render.rendering.renderer``, ``gpustack_render.api.ModelDeployment``.
DOTTED = re.compile(_LEFT + rf"((?:{'|'.join(PACKAGES)})(?:\.\w+)+)")
#: ``status.py`` alone.
BARE = re.compile(_LEFT + r"(\w+\.py)\b(?![\w/-])")
#: ``tests/unit/test_layers.py``, ``golden/admit-name-*``.
REPO_PATH = re.compile(_LEFT + rf"((?:{'|'.join(TOP_DIRS)})/[\w./*-]*[\w*/])")
#: A path written as a pattern for the reader to fill in: ``golden/<verb>-<case>/``,
#: ``docs/design/NNNN-title.md``.
PLACEHOLDER = re.compile(r"<|NNNN")
#: The header row of a table recording an old layout.
BEFORE_HEADER = re.compile(r"^\|\s*Before\s*\|")


def _markdown() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _sources() -> list[Path]:
    return [path for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))]


def _markdown_lines(path: Path) -> Iterator[tuple[int, str]]:
    history = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if BEFORE_HEADER.match(line):
            history = True
            continue
        if not line.startswith("|"):
            history = False
        elif history:
            yield number, "|" + line.split("|", 2)[2]  # the "Before" cell dropped
            continue
        yield number, line


def _prose_lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of the docstrings and comments of one module (string literals included)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    for token in tokens:
        if token.type in (tokenize.STRING, tokenize.COMMENT):
            for offset, line in enumerate(token.string.splitlines()):
                yield token.start[0] + offset, line


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _has_attributes(module: str, names: list[str]) -> bool:
    value: object = importlib.import_module(module)
    for name in names:
        if not hasattr(value, name):
            return False
        value = getattr(value, name)
    return True


def _dotted_resolves(name: str) -> bool:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if _module_file(parts[:end]) is not None:
            return _has_attributes(".".join(parts[:end]), parts[end:])
    return False


def _library_path_resolves(path: str, suffix: str) -> bool:
    parts = ["gpustack_render", *path.split("/")]
    if suffix == ".py":
        return (ROOT.joinpath(*parts[:-1]) / f"{parts[-1]}.py").is_file()
    module = _module_file(parts)
    return module is not None and _has_attributes(".".join(parts), [suffix[1:]])


_MODULE_NAMES = {path.name for path in _sources()}


def problems(line: str) -> Iterator[str]:
    """The names on one line that resolve to nothing in the repository."""
    for match in PACKAGE_PATH.finditer(line):
        if not (ROOT / match[1]).exists():
            yield match[1]
    for match in LIBRARY_PATH.finditer(line):
        if not _library_path_resolves(match[1], match[2]):
            yield match[1] + match[2]
    for match in DOTTED.finditer(line):
        if not _dotted_resolves(match[1].rstrip(".")):
            yield match[1]
    for match in BARE.finditer(line):
        if match[1] not in _MODULE_NAMES:
            yield match[1]
    for match in REPO_PATH.finditer(line):
        if not PLACEHOLDER.search(match[1]) and not glob.glob(match[1], root_dir=ROOT):
            yield match[1]


Lines = Callable[[Path], Iterator[tuple[int, str]]]


def _documents() -> list[Any]:
    reads: list[tuple[Path, Lines]] = [(path, _markdown_lines) for path in _markdown()]
    reads += [(path, _prose_lines) for path in _sources()]
    return [pytest.param(path, read, id=path.relative_to(ROOT).as_posix()) for path, read in reads]


@pytest.mark.parametrize(("path", "lines"), _documents())
def test_every_module_path_a_doc_names_exists(path: Path, lines: Lines) -> None:
    stale = [f"{number}: {name}" for number, line in lines(path) for name in problems(line)]
    assert stale == [], f"{path.relative_to(ROOT)} names paths that do not exist: {stale}"


@pytest.mark.parametrize(
    "line",
    [
        "`gpustack_render/rollout.py` is the planner",
        "lives in `reconcile/statuses.py`",
        "`reconcile/teardown.plan_everything`",
        "see ``gpustack_render.rendering.render``",
        "the command line (`cli.py`)",
        "cases in `golden/inject-refuse-b5-*`",
    ],
)
def test_a_stale_name_is_found(line: str) -> None:
    assert list(problems(line)) != []


@pytest.mark.parametrize(
    "line",
    [
        "`gpustack_render/reconcile/rollout.py` is the planner",
        "`gpustack_controller/` and `gpustack_webhook/kube.py`",
        "`rendering/pods.py`, `reconcile/teardown.plan_teardown`",
        ":class:`~gpustack_render.rendering.stamping.Slot`, ``gpustack_render.render``",
        "`status.py`, `kube.py`",
        "`tests/unit/test_layers.py`, `golden/admit-name-*`, `golden/<verb>-<case>/`",
        "design notes in `docs/design/NNNN-title.md`",
        "upstream `pkg/controller/jobs/pod/pod_controller.go` and /etc/gpustack/kvcache",
    ],
)
def test_a_current_name_resolves(line: str) -> None:
    assert list(problems(line)) == []
