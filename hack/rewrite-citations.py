"""Rewrite citations of the old specification paths to the contract files in docs/contract/.

Usage: ``python hack/rewrite-citations.py [--root DIR] [--check] [PATH ...]``. Without paths it
rewrites every file ``hack/check-citations.py`` scans, except docs/contract/ itself (whose files
cite each other by bare name on purpose). ``--check`` rewrites nothing and exits 1 when a file
would change. Running it twice changes nothing the second time.

What it rewrites (see docs/contract/README.md):

- ``render.md §17.2``, ``reference/render.md`` → ``docs/contract/render.md`` (likewise
  ``controller.md``, ``admission.md``, ``kv-injection.md``, ``kubernetes-notes.md``);
- ``api.md`` / ``reference/api.md`` (the specification's API notes) →
  ``docs/contract/api-notes.md``;
  ``docs/api.md`` (the generated reference) is left alone;
- ``DECISIONS.md`` → ``docs/contract/decisions.md``; ``INTERFACES.md`` →
  ``docs/contract/interfaces.md``; decision ids ``D<n>`` stay as they are;
- ``../shared/spec/...`` and ``../shared/conventions.md`` links → the matching docs/contract/ file;
- a few bare ``§N`` whose file was ambiguous (``FIXUPS``) get their file named.

In Python files only comments and docstrings are touched, and a line the rewrite pushes past 100
characters is re-wrapped (the overflow moves to the next line of the same comment or docstring).
"""

from __future__ import annotations

import argparse
import io
import re
import sys
import tokenize
from collections.abc import Callable, Iterable
from pathlib import Path

LIMIT = 100

#: The specification's reference notes → contract files.
REFERENCE = {
    "render": "render.md",
    "controller": "controller.md",
    "admission": "admission.md",
    "kv-injection": "kv-injection.md",
    "kubernetes-notes": "kubernetes-notes.md",
    "api": "api-notes.md",
}
TOP = {"DECISIONS": "decisions.md", "INTERFACES": "interfaces.md"}
SEEDS = ("model-deployment", "kv-cache-injection")

_REF = "|".join(sorted(REFERENCE, key=len, reverse=True))
_UP = r"(?:\.\./)*"


def _unless_literal(m: re.Match[str], new: str) -> str:
    """``new``, unless the match is a whole quoted string (``"api.md"`` in a path join)."""
    before = m.string[m.start() - 1 : m.start()]
    after = m.string[m.end() : m.end() + 1]
    return m.group(0) if before in ("'", '"') and after == before else new


RULES: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        re.compile(rf"{_UP}shared/spec/reference/(?P<n>{_REF})\.md"),
        lambda m: f"docs/contract/{REFERENCE[m['n']]}",
    ),
    (
        re.compile(rf"{_UP}shared/spec/seeds/(?P<n>{'|'.join(SEEDS)})\.md"),
        lambda m: f"docs/contract/{m['n']}.md",
    ),
    (
        re.compile(rf"{_UP}shared/spec/(?P<n>DECISIONS|INTERFACES)\.md"),
        lambda m: f"docs/contract/{TOP[m['n']]}",
    ),
    (re.compile(rf"{_UP}shared/conventions\.md"), lambda m: "docs/contract/conventions.md"),
    (re.compile(rf"{_UP}shared/spec/?"), lambda m: "docs/contract/"),
    (
        re.compile(rf"(?<![\w./-])(?:reference/)?(?P<n>{_REF})\.md\b"),
        lambda m: _unless_literal(m, f"docs/contract/{REFERENCE[m['n']]}"),
    ),
    (
        re.compile(r"(?<![\w./-])(?P<n>DECISIONS|INTERFACES)\.md\b"),
        lambda m: _unless_literal(m, f"docs/contract/{TOP[m['n']]}"),
    ),
]

#: Bare sections whose file the surrounding text does not make clear: (text, replacement).
#: Matched anywhere, so they survive modules being moved.
FIXUPS = (
    ("exactly that one value (§8.1).", "exactly that one value (admission.md §8.1)."),
    ('"""§10.1 on UPDATE:', '"""admission.md §10.1 on UPDATE:'),
    ('"""§10.1: a positive', '"""admission.md §10.1: a positive'),
    ('"""§10.2: a new binding', '"""admission.md §10.2: a new binding'),
)

#: What is scanned by default (the checker's list), and what is never rewritten.
SCANNED = (
    "gpustack_render",
    "gpustack_controller",
    "gpustack_webhook",
    "tests",
    "docs",
    "examples",
    "deploy",
    "hack",
    "bench",
    "golden",
    "README.md",
    "CHANGELOG.md",
    "Makefile",
    "pyproject.toml",
)
SUFFIXES = frozenset({".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".sh", ".cfg", ".json"})
SKIPPED_DIRS = frozenset({".venv", ".git", "__pycache__", ".mypy_cache", ".ruff_cache", "build"})
SKIPPED = frozenset(
    {"hack/check-citations.py", "hack/rewrite-citations.py", "tests/unit/test_citations.py"}
)


def rewrite_text(text: str) -> str:
    """Every citation form in ``text`` rewritten (the function is idempotent)."""
    for pattern, repl in RULES:
        text = pattern.sub(repl, text)
    return text


def _fixups(text: str) -> str:
    for old, new in FIXUPS:
        text = text.replace(old, new)
    return text


#: What a line of a module holds, for re-wrapping: its kind and the block it belongs to (one
#: docstring, or one run of comment-only lines at one indentation).
Kind = tuple[str, int]


def _kinds(source: str) -> tuple[list[Kind], dict[int, int]]:
    """Per line (0-based): ("doc" | "comment" | "code", block id); and the column of a comment
    that follows code on the same line."""
    lines = source.split("\n")
    kinds: list[Kind] = [("code", -1)] * len(lines)
    trailing: dict[int, int] = {}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    significant = [t for t in tokens if t.type not in (tokenize.NL, tokenize.COMMENT)]
    for i, t in enumerate(significant):
        if t.type != tokenize.STRING:
            continue
        before = significant[i - 1].type if i else tokenize.ENCODING
        after = significant[i + 1].type if i + 1 < len(significant) else tokenize.ENDMARKER
        starts = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
        if before in starts and after in (tokenize.NEWLINE, tokenize.ENDMARKER):
            for n in range(t.start[0] - 1, t.end[0]):
                kinds[n] = ("doc", i)
    block = -2
    for t in tokens:
        if t.type != tokenize.COMMENT:
            continue
        n = t.start[0] - 1
        if lines[n][: t.start[1]].strip():
            trailing[n] = t.start[1]
            continue
        prev = kinds[n - 1] if n else ("code", -1)
        if not (prev[0] == "comment" and _prefix(lines[n - 1]) == _prefix(lines[n])):
            block -= 1
        kinds[n] = ("comment", block)
    return kinds, trailing


def _prefix(line: str) -> str:
    """What a continuation of this comment or docstring line starts with (a list item's text
    continues under its text, not under its marker)."""
    m = re.match(r"(\s*(?:#:?\s?)?)(?:[-*] |\d+\. )?", line)
    if m is None:  # pragma: no cover - the pattern matches every string
        return ""
    lead, marker = m.group(1), m.group(0)[len(m.group(1)) :]
    if lead.strip() and not lead.endswith(" "):
        lead += " "
    return lead + " " * len(marker)


#: The dashes that end a section-ruler comment.
RULER = re.compile(r"\s+-{3,}\s*$")


def _wrap(lines: list[str], kinds: list[Kind], index: int) -> None:
    """Re-wrap lines[index], and the lines of its block it overflows into, to LIMIT."""
    i = index
    while i < len(lines) and len(lines[i]) > LIMIT and kinds[i][0] != "code":
        line = lines[i]
        prefix = _prefix(line)
        ruler = RULER.search(line) if kinds[i][0] == "comment" else None
        if ruler and ruler.start() + 4 <= LIMIT:
            # A section ruler ("# --- title -----"): shorten the dashes instead of wrapping.
            lines[i] = line[: ruler.start()] + " " + "-" * (LIMIT - ruler.start() - 1)
            return
        if ruler:  # no room left for the dashes: drop them
            lines[i] = line[: ruler.start()]
            continue
        cut = LIMIT + 1
        while (cut := line.rfind(" ", 0, cut)) > len(prefix) and line[cut + 1 : cut + 2] == "§":
            pass  # never separate a file from the section that follows it
        if cut <= len(prefix):
            return  # one long word: leave it
        head, tail = line[:cut].rstrip(), line[cut + 1 :].lstrip()
        lines[i] = head
        nxt = i + 1
        joinable = (
            nxt < len(lines)
            and kinds[nxt] == kinds[i]
            and _prefix(lines[nxt]) == prefix
            and lines[nxt].strip() not in ("", '"""', "#", "#:")
            and not re.match(r"\s*(#:?\s*)?([-*] |\d+\. |\|)", lines[nxt])
        )
        if joinable:
            lines[nxt] = f"{prefix}{tail} {lines[nxt][len(prefix) :]}"
        else:
            lines.insert(nxt, f"{prefix}{tail}")
            kinds.insert(nxt, kinds[i])
        i = nxt


def rewrite_python(source: str) -> str:
    """Rewrite citations in the comments and docstrings of one Python module."""
    source = _fixups(source)
    try:
        kinds, trailing = _kinds(source)
    except (tokenize.TokenError, SyntaxError):
        return source
    lines = source.split("\n")
    # Bottom-up: a wrap only inserts lines below the one it wraps, so the line numbers still to
    # visit (and the trailing-comment columns recorded for them) stay valid.
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i]
        if i in trailing and kinds[i][0] == "code":
            col = trailing[i]
            new = line[:col] + rewrite_text(line[col:])
            if new != line and len(new) > LIMIT:
                # Too long with its comment: the comment moves to its own line above the code.
                code = line[:col].rstrip()
                indent = code[: len(code) - len(code.lstrip())]
                comment = rewrite_text(line[col:]).lstrip("#").strip()
                lines[i : i + 1] = [f"{indent}# {comment}", code]
                kinds[i : i + 1] = [("comment", -10_000 - i), ("code", -1)]
                _wrap(lines, kinds, i)
            else:
                lines[i] = new
        elif kinds[i][0] != "code":
            new = rewrite_text(line)
            if new != line:
                lines[i] = new
                _wrap(lines, kinds, i)
    return "\n".join(lines)


def rewrite_file(path: Path) -> str | None:
    """The new text of ``path``, or None when nothing changes."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return None
    new = rewrite_python(text) if path.suffix == ".py" else rewrite_text(_fixups(text))
    return None if new == text else new


def default_files(root: Path) -> Iterable[Path]:
    for entry in SCANNED:
        base = root / entry
        if base.is_file():
            yield base
        elif base.is_dir():
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(root)
                if any(part in SKIPPED_DIRS for part in rel.parts) or not path.is_file():
                    continue
                if rel.parts[:2] == ("docs", "contract") or rel.as_posix() in SKIPPED:
                    continue
                if path.suffix in SUFFIXES:
                    yield path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--check", action="store_true", help="only report files that would change")
    parser.add_argument("paths", nargs="*", type=Path)
    args = parser.parse_args(argv)
    root: Path = args.root
    files = [p if p.is_absolute() else root / p for p in args.paths] or list(default_files(root))
    pending = 0
    for path in files:
        new = rewrite_file(path)
        if new is None:
            continue
        pending += 1
        rel = path.relative_to(root) if path.is_relative_to(root) else path
        if args.check:
            print(f"{rel}: citations to rewrite")
        else:
            path.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
    return 1 if args.check and pending else 0


if __name__ == "__main__":
    sys.exit(main())
