"""Shared by the engine checkers (``check_vllm.py``, ``check_sglang.py``).

These run with an engine venv's Python, not the project's: standard library only here.

- :func:`read_request` / :func:`emit`: the JSON exchanged with ``hack/engines-check.py``;
- :func:`capture`: run a parser step, turning ``SystemExit`` and exceptions into the message
  the engine printed or raised;
- :class:`KeyReads`: where the engine's source reads a key of a config dict (``X.get("k")``,
  ``X.pop("k")``, ``X["k"]``, ``"k" in X``, ``get_from_extra_config("k")``), found with ``ast``
  so a report can cite file and line in the installed package.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

MARKER = "@@REPORT@@"


def read_request() -> dict[str, Any]:
    return json.load(sys.stdin)  # type: ignore[no-any-return]


def emit(report: dict[str, Any]) -> None:
    sys.stdout.flush()
    sys.stdout.write("\n" + MARKER + json.dumps(report) + "\n")
    sys.stdout.flush()


class StepFailedError(Exception):
    """A check step failed; the message is what the engine said."""


def capture(step: str, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; raise :class:`StepFailedError` with the engine's own message when it fails."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return fn()
    except SystemExit as exc:
        text = err.getvalue()
        # argparse's message is everything after the usage text: from "error:" on.
        start = text.rfind("error:")
        message = " ".join(text[start:].split()) if start >= 0 else text.strip()[-600:]
        message = message.replace(" For further information visit", " —").split(" — https")[0]
        raise StepFailedError(f"{step}: exit {exc.code}: {message}") from None
    except StepFailedError:
        raise
    except Exception as exc:  # the engine's validation error, whatever its type
        text = " ".join(str(exc).split()).split(" For further information visit")[0]
        text = text.replace("[type=value_error, input_value=ArgsKwargs((), {", "[")
        raise StepFailedError(f"{step}: {type(exc).__name__}: {text[:700]}") from None


def short_traceback() -> str:
    return "".join(traceback.format_exc(limit=-3))


class KeyReads:
    """Where string keys of a config dict are read in a set of source files."""

    def __init__(self, site_packages: Path) -> None:
        self.site = site_packages
        # key → ["pkg/path.py:line", ...]
        self.reads: dict[str, list[str]] = {}
        self.files: list[str] = []

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.site))

    def scan(self, path: Path, holder: str, function: str | None = None) -> KeyReads:
        """Record reads of ``holder``-named dicts (the name contains ``holder``) in ``path``.

        ``function`` limits the scan to the body of one function of that name.
        """
        tree = ast.parse(path.read_text(), str(path))
        roots: Iterable[ast.AST] = [tree]
        if function is not None:
            roots = [
                n
                for n in ast.walk(tree)
                if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == function
            ]
        self.files.append(self.rel(path) + (f" ({function})" if function else ""))
        for root in roots:
            for node in ast.walk(root):
                for key in _keys_read(node, holder):
                    where = f"{self.rel(path)}:{node.lineno}"
                    self.reads.setdefault(key, [])
                    if where not in self.reads[key]:
                        self.reads[key].append(where)
        return self

    def where(self, key: str) -> list[str]:
        return self.reads.get(key, [])


def _holds(expr: ast.AST, holder: str) -> bool:
    return holder in ast.unparse(expr)


def _const_str(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _keys_read(node: ast.AST, holder: str) -> list[str]:
    keys: list[str] = []
    if isinstance(node, ast.Call) and node.args:
        func = node.func
        first = _const_str(node.args[0])
        if first is None:
            return keys
        if holder == "environ" and (
            (isinstance(func, ast.Attribute) and func.attr == "getenv")
            or (isinstance(func, ast.Name) and func.id == "getenv")
        ):
            keys.append(first)
        elif isinstance(func, ast.Attribute):
            reads_holder = func.attr in ("get", "pop") and _holds(func.value, holder)
            if reads_holder or func.attr == "get_from_extra_config":
                keys.append(first)
        elif isinstance(func, ast.Name) and func.id == "get_from_extra_config":
            keys.append(first)
    elif isinstance(node, ast.Subscript) and _holds(node.value, holder):
        key = _const_str(node.slice)
        if key is not None:
            keys.append(key)
    elif (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.In | ast.NotIn)
        and _holds(node.comparators[0], holder)
    ):
        key = _const_str(node.left)
        if key is not None:
            keys.append(key)
    return keys


def import_closure(start: Path, root: Path, root_module: str) -> list[Path]:
    """``start`` and every module under ``root`` it imports, transitively (``ast``, no import).

    ``root_module`` is the dotted name of ``root``.
    """
    seen: list[Path] = []
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen or not path.exists():
            continue
        seen.append(path)
        tree = ast.parse(path.read_text(), str(path))
        module = _module_name(path, root, root_module)
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve_from(node, module, path)
                if base is None:
                    continue
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            for name in names:
                target = _module_file(name, root, root_module)
                if target is not None:
                    todo.append(target)
    return seen


def _module_name(path: Path, root: Path, root_module: str) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([root_module, *parts])


def _resolve_from(node: ast.ImportFrom, module: str, path: Path) -> str | None:
    if node.level == 0:
        return node.module
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        package = package.rsplit(".", 1)[0]
    return f"{package}.{node.module}" if node.module else package


def _module_file(name: str, root: Path, root_module: str) -> Path | None:
    if name != root_module and not name.startswith(root_module + "."):
        return None
    rel = name[len(root_module) :].lstrip(".").split(".") if name != root_module else []
    base = root.joinpath(*rel) if rel else root
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.exists():
            return candidate
    return None


def without_user_args(line: dict[str, Any]) -> list[str] | None:
    """The argv without the role's ``extraArgs`` when the renderer appended them last."""
    extra = line.get("user_args") or []
    argv = line["argv"]
    if extra and len(argv) > len(extra) and argv[-len(extra) :] == extra:
        return list(argv[: -len(extra)])
    return None


def attribute_to_user_args(line: dict[str, Any], check: Callable[[list[str]], Any]) -> str | None:
    """A note when ``line`` fails only because of the role's own ``extraArgs``."""
    rendered = without_user_args(line)
    if rendered is None:
        return None
    try:
        check(rendered)
    except StepFailedError as exc:
        return f"without the role's extraArgs it still fails: {exc}"
    return (
        f"the renderer's part passes without the role's extraArgs {line['user_args']}: "
        "the refused flag is the user's own (the golden's input)"
    )
