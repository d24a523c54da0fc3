"""Check that every citation in the repository points at something the repository contains.

Usage: ``python hack/check-citations.py [--root DIR]``. Exit 0 when every citation resolves,
1 otherwise, with one ``file:line: problem`` per broken citation.

A citation names a contract file under ``docs/contract/`` (see docs/contract/README.md for how
they are written):

- ``docs/contract/render.md §17.2`` — or the short forms: ``render.md §17.2``,
  ``reference/render.md §17.2``,
  ``api.md §11.4`` (= ``docs/contract/api-notes.md``), ``DECISIONS.md`` (=
  ``docs/contract/spec-decisions.md``). The file must exist, and every ``§N``/``§N.M`` on the same
  line after it (and a bare ``§N`` on a later line of the same source file) must be a section of it.
  A rule id right after the file (``injection-notes.md B4``) must be defined in it.
- ``D<n>``: a decision; ``docs/contract/spec-decisions.md`` must have a ``## D<n>`` heading.
- ``the seed's "Rollout behavior"``: a section of one of the two seeds
  (``docs/contract/model-deployment.md``, ``docs/contract/kv-cache-injection.md``).

Any path into the specification directory that used to sit beside the repository is an error:
the repository must not cite what it does not contain.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

CONTRACT = Path("docs") / "contract"

#: Directories and top-level files scanned, relative to the root.
SCANNED = (
    "gpustack_render",
    "gpustack_kube",
    "gpustack_controller",
    "gpustack_webhook",
    "gpustack_modelmanager",
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
#: Files that spell citations as data (the checker and its test).
SELF = frozenset({"hack/check-citations.py", "tests/unit/test_citations.py"})

#: Cited name (as written after any directory) → file under docs/contract/.
CONTRACT_FILES = {
    "render": "render.md",
    "controller": "controller.md",
    "admission": "admission.md",
    "kv-injection": "injection-notes.md",
    "injection-notes": "injection-notes.md",
    "kubernetes-notes": "kubernetes-notes.md",
    "api": "api-notes.md",
    "api-notes": "api-notes.md",
    "DECISIONS": "spec-decisions.md",
    "spec-decisions": "spec-decisions.md",
    "INTERFACES": "interfaces.md",
    "model-deployment": "model-deployment.md",
    "kv-cache-injection": "kv-cache-injection.md",
    "model-delivery": "model-delivery.md",
    "elastic-ep": "elastic-ep.md",
}
SEEDS = ("model-deployment.md", "kv-cache-injection.md")

_NAMES = "|".join(sorted(CONTRACT_FILES, key=len, reverse=True))
#: A contract file named in the short form (no directory, or the specification's ``reference/``).
SHORT = re.compile(rf"(?<![\w./-])(?:reference/|seeds/)?(?P<name>{_NAMES})\.md\b")
#: A contract file named by its repository path.
FULL = re.compile(r"docs/contract/(?P<file>[\w.-]+\.md)")
_ID = r"\d+(?:\.\d+)*[a-z]?"
SECTION = re.compile(rf"§\s?(?P<id>{_ID})(?:\s?[–-]\s?§\s?(?P<end>{_ID}))?")
#: The run of section tokens right after a file mention: "§2", "§3–§12", "§9, §10 and §17".
RUN = re.compile(rf"[`'\"]*(?:[\s,]*(?:and\s+)?§\s?{_ID}(?:\s?[–-]\s?§\s?{_ID})?)+")
RULE = re.compile(r"\A[`'\"]*\s+(?P<id>[A-Z]\d+[a-z]?)\b")
DECISION = re.compile(r"(?<![\w-])D(?P<n>\d{1,3})\b")
SEED_SECTION = re.compile(r"seed(?:'s|,)\s+\"(?P<title>[A-Z][^\"]{0,60})\"")
#: The specification's home outside the repository. Spelled in parts so that this checker does
#: not itself read as a citation to tools that search the tree for the path.
OUTSIDE = "../" + "shared"
SHARED = re.compile(re.escape(OUTSIDE) + "|" + re.escape("shared" + "/spec"))

HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*$")
NUMBERED_HEADING = re.compile(r"^#{1,6}\s+(?P<id>\d+(?:\.\d+)*[a-z]?)\.?\s")
BOLD_NUMBER = re.compile(r"^\*\*(?P<id>\d+\.\d+[a-z]?)\b")
LIST_ITEM = re.compile(r"^(?P<n>\d+)\.\s")
TABLE_ID = re.compile(r"^\|\s*\**(?P<id>[A-Z]?\d+[a-z]?)\**\s*\|")
DECISION_HEADING = re.compile(r"^##\s+D(?P<n>\d+)\b")


@dataclass
class Contract:
    """The citable anchors of one contract file."""

    sections: set[str] = field(default_factory=set)
    rules: set[str] = field(default_factory=set)
    titles: set[str] = field(default_factory=set)


def anchors(text: str) -> Contract:
    """Sections (headings, bold ``**N.M`` labels, numbered steps and table ids inside a top-level
    section, as ``N.M``), rule ids (``R1``, ``B4``) and heading titles of one contract file."""
    out = Contract()
    top = ""
    sub = ""
    for line in text.splitlines():
        if m := NUMBERED_HEADING.match(line):
            sid = m["id"]
            out.sections.add(sid)
            top, sub = sid.split(".")[0], sid
        elif (m := BOLD_NUMBER.match(line)) is not None:
            out.sections.add(m["id"])
            sub = m["id"]
        if m := HEADING.match(line):
            out.titles.add(re.sub(r"^[\d.]+\s+", "", m["title"]).strip("`*"))
        if not top:
            continue
        if m := LIST_ITEM.match(line):
            out.sections.add(f"{top}.{m['n']}")
        elif (m := TABLE_ID.match(line)) is not None:
            rid = m["id"]
            if rid[0].isalpha():
                out.rules.add(rid)
            else:
                out.sections.add(f"{top}.{rid}")
                if sub != top:
                    out.sections.add(f"{sub}{rid}")
    return out


@dataclass(frozen=True)
class Broken:
    path: str
    line: int
    problem: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.problem}"


def scanned_files(root: Path) -> Iterator[Path]:
    for entry in SCANNED:
        base = root / entry
        if base.is_file():
            yield base
        elif base.is_dir():
            for path in sorted(base.rglob("*")):
                rel = path.relative_to(root)
                if any(part in SKIPPED_DIRS for part in rel.parts) or not path.is_file():
                    continue
                if path.suffix in SUFFIXES and rel.as_posix() not in SELF:
                    yield path


def _cited_files(line: str) -> list[tuple[int, int, str]]:
    """(start, end, contract file name) of every contract file the line names, in order."""
    found = [(m.start(), m.end(), m["file"]) for m in FULL.finditer(line)]
    found += [(m.start(), m.end(), CONTRACT_FILES[m["name"]]) for m in SHORT.finditer(line)]
    return sorted(found)


def _section_ids(text: str) -> Iterator[str]:
    for m in SECTION.finditer(text):
        yield m["id"]
        if m["end"]:
            yield m["end"]


def _resolves(sid: str, contract: Contract) -> bool:
    return sid in contract.sections


def _line_problems(
    line: str,
    *,
    rel: str,
    context: str,
    contracts: dict[str, Contract],
    decisions: set[int],
    seed_titles: set[str],
) -> tuple[list[str], str]:
    """The problems of one line, and the context (contract file) for the lines after it."""
    problems: list[str] = []
    if SHARED.search(line):
        problems.append(f"refers to {OUTSIDE}, which the repository does not hold")
    for m in DECISION.finditer(line):
        if int(m["n"]) not in decisions:
            problems.append(f"D{m['n']} is not a decision in docs/contract/spec-decisions.md")
    for m in SEED_SECTION.finditer(line):
        if m["title"] not in seed_titles:
            problems.append(f'seed section "{m["title"]}" is not a heading of either seed')
    in_contract = rel.startswith(f"{CONTRACT.as_posix()}/")
    if in_contract:
        context = Path(rel).name
    cited = _cited_files(line)
    # Each section token belongs to the file named last before it on the line (or, with none,
    # to the context: the last file cited earlier in a source file, the file itself inside
    # docs/contract/). In docs/contract/ a mention scopes only the run of sections right after
    # it: "(`render.md §2`) … §10" means this file's §10.
    spans: list[tuple[int, int, str]] = [(0, 0, context)] if context else []
    for start, end, name in cited:
        spans.append((start, end, name))
        if in_contract:
            run = RUN.match(line, end)
            spans.append((run.end() if run else end, -1, context))
    for i, (start, end, name) in enumerate(spans):
        stop = spans[i + 1][0] if i + 1 < len(spans) else len(line)
        problems += _span_problems(line[max(start, end) : stop], name, end > 0, contracts)
    if cited and not in_contract:
        context = cited[-1][2]
    return problems, context


def _span_problems(tail: str, name: str, named: bool, contracts: dict[str, Contract]) -> list[str]:
    target = f"docs/contract/{name}"
    contract = contracts.get(name)
    if contract is None:
        return [f"{target} does not exist"] if named else []
    problems = [
        f"{target} has no section §{sid}"
        for sid in _section_ids(tail)
        if not _resolves(sid, contract)
    ]
    rule = RULE.match(tail) if named else None
    if rule and not DECISION.fullmatch(rule["id"]) and rule["id"] not in contract.rules:
        problems.append(f"{target} defines no rule {rule['id']}")
    return problems


def check(root: Path) -> list[Broken]:
    """Every broken citation under ``root``."""
    contracts: dict[str, Contract] = {}
    for path in sorted((root / CONTRACT).glob("*.md")):
        contracts[path.name] = anchors(path.read_text(encoding="utf-8"))
    decisions = (
        {
            int(m["n"])
            for line in (root / CONTRACT / "spec-decisions.md")
            .read_text(encoding="utf-8")
            .splitlines()
            if (m := DECISION_HEADING.match(line))
        }
        if (root / CONTRACT / "spec-decisions.md").is_file()
        else set()
    )
    seed_titles = set().union(*(contracts[s].titles for s in SEEDS if s in contracts))

    broken: list[Broken] = []
    for path in scanned_files(root):
        rel = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        context = ""  # the contract file a bare "§N" on a later line refers to
        for lineno, line in enumerate(text.splitlines(), start=1):
            problems, context = _line_problems(
                line,
                rel=rel,
                context=context,
                contracts=contracts,
                decisions=decisions,
                seed_titles=seed_titles,
            )
            broken += [Broken(rel, lineno, problem) for problem in problems]
    return broken


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    args = parser.parse_args(argv)
    broken = check(args.root)
    for item in broken:
        print(item)
    if broken:
        print(f"{len(broken)} broken citation(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
