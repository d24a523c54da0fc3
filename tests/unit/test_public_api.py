"""The public names: importable, typed package, and documented in docs/python-api.md."""

from __future__ import annotations

import re
from pathlib import Path

import gpustack_render

DOC = Path(__file__).resolve().parents[2] / "docs" / "python-api.md"


def test_every_public_name_exists() -> None:
    missing = [n for n in gpustack_render.__all__ if not hasattr(gpustack_render, n)]
    assert missing == []
    assert len(set(gpustack_render.__all__)) == len(gpustack_render.__all__)


def test_every_public_name_is_documented() -> None:
    text = DOC.read_text()
    documented = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", text))
    undocumented = sorted(set(gpustack_render.__all__) - documented)
    assert undocumented == []


def test_package_is_typed() -> None:
    assert (Path(gpustack_render.__file__).parent / "py.typed").exists()


#: A signature written in docs/python-api.md: ``name(params)``, optionally ``-> result``.
_SIGNATURE = re.compile(r"`(?P<name>[A-Za-z_][A-Za-z0-9_]*)\((?P<params>[^`]*?)\)(?: -> [^`]*)?`")


def _split(params: str) -> list[str]:
    """``params`` split at the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in params:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def _documented_signatures() -> list[tuple[str, str]]:
    """The signatures in the Name column of the page's tables (the other columns mention
    methods of the listed names, which are not exported themselves)."""
    out = []
    for line in DOC.read_text().splitlines():
        if not line.startswith("| `"):
            continue
        name_cell = line.split(" | ")[0]
        out += [
            (m["name"], m["params"])
            for m in _SIGNATURE.finditer(name_cell)
            if m["params"].strip() != "..."
        ]
    return out


def _value(text: str | None) -> object:
    """A default as written (``""``, ``()``, ``None``) or as ``repr`` gives it, read as a value
    when it is a literal."""
    import ast

    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def test_every_documented_signature_is_the_real_one() -> None:
    """Issue 32 item 6: each ``name(...)`` python-api.md writes is exported, and its parameters
    are the function's own, in order, with the same kinds (positional, keyword-only after
    ``*``) and the defaults the page shows (``...`` leaves a list out)."""
    import inspect

    signatures = _documented_signatures()
    assert len(signatures) > 12, "the pattern no longer finds the documented signatures"
    problems = []
    for name, params in signatures:
        if name not in gpustack_render.__all__:
            problems.append(f"{name}: documented but not exported")
            continue
        real = inspect.signature(getattr(gpustack_render, name))
        documented: list[tuple[str, str, str | None]] = []
        keyword_only = False
        for token in _split(params):
            if token == "*":
                keyword_only = True
                continue
            pname, _, default = token.partition("=")
            kind = "KEYWORD_ONLY" if keyword_only else "POSITIONAL_OR_KEYWORD"
            documented.append((pname.strip(), kind, default.strip() or None))
        actual = [
            (
                p.name,
                p.kind.name,
                None if p.default is inspect.Parameter.empty else repr(p.default),
            )
            for p in real.parameters.values()
        ]
        want = [(n, k) for n, k, _ in actual]
        got = [(n, k) for n, k, _ in documented]
        if got != want:
            problems.append(f"{name}: documented {got}, the function takes {want}")
            continue
        for (pname, _, shown), (_, _, real_default) in zip(documented, actual, strict=True):
            if shown is not None and _value(shown) != _value(real_default):
                problems.append(f"{name}: {pname} shown with default {shown}, is {real_default}")
    assert problems == [], "\n".join(problems)
