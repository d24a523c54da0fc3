"""Seeds and mutations for the fuzz suite: every golden case's input, mangled.

A seed is one golden case: its first document (a ModelDeployment or a Pod) and the objects it
looks up. A mutation replaces, deletes or adds one member anywhere in the document, with
arbitrary JSON, a wrong type, an empty value, or a value nested far past the bound; a few are
applied in a row. The budget (examples per test) comes from ``GPUSTACK_FUZZ_EXAMPLES``:
small and derandomized by default (CI), large and random under ``make fuzz``.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from gpustack_render.cli.documents import Bundle, read_bundle
from gpustack_render.schema.lookups import StaticLookups

GOLDEN = Path(__file__).resolve().parents[2] / "golden"

#: Examples per fuzz test: the default keeps the suite under a minute; ``make fuzz`` raises it.
EXAMPLES = int(os.environ.get("GPUSTACK_FUZZ_EXAMPLES", "1000"))
#: A long run explores; the default run draws the same examples every time.
LONG_RUN = "GPUSTACK_FUZZ_EXAMPLES" in os.environ

FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not LONG_RUN,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@dataclass(frozen=True)
class Seed:
    """One golden case's subject document and its world."""

    case: str
    subject: dict[str, Any]
    bundle: Bundle

    def lookups(self) -> StaticLookups:
        return self.bundle.lookups(default_namespace="team-a")


@cache
def seeds(kind: str) -> tuple[Seed, ...]:
    """Golden cases whose first document is of ``kind`` (``ModelDeployment`` or ``Pod``)."""
    out = []
    for path in sorted(GOLDEN.glob("*/input.yaml")):
        try:
            bundle = read_bundle([(str(path), path.read_text())])
        except ValueError:
            continue  # a case about unreadable input: nothing to seed from
        docs = bundle.deployments if kind == "ModelDeployment" else bundle.pods
        if docs:
            out.append(Seed(path.parent.name, docs[0], bundle))
    return tuple(out)


class _Deep(list[Any]):
    """The outermost level of a deep value: printed short, so a failing example can be
    reported (printing every level would hit the recursion limit itself)."""

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(f"deep({self.depth})")

    depth = 0


def deep(depth: int, leaf: Any = 1) -> Any:
    """A value nested ``depth`` levels (lists and objects alternate), built without recursion."""
    value = leaf
    for i in range(depth - 1):
        value = {"x": value} if i % 2 else [value]
    if depth <= 0:
        return value
    out = _Deep([value])
    out.depth = depth
    return out


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.sampled_from(["", "0", "-1", "true", "vLLM", "SGLang", "/", "..", "a" * 300, "\x00"]),
)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
    ),
    max_leaves=12,
)
replacements: st.SearchStrategy[Any] = st.one_of(
    json_values,
    st.just({}),
    st.just([]),
    # Around the bound, and past the parser's and the interpreter's recursion limits.
    st.sampled_from([95, 101, 999, 1200, 3000]).map(deep),
)


def _containers(doc: Any) -> list[tuple[Any, Any]]:
    """Every (container, key or index) slot of ``doc``, walked without recursion."""
    slots: list[tuple[Any, Any]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, child in node.items():
                slots.append((node, key))
                stack.append(child)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                slots.append((node, i))
                stack.append(child)
    return slots


@st.composite
def mutated(draw: st.DrawFn, doc: dict[str, Any], *, most: int = 3) -> dict[str, Any]:
    """``doc`` with one to ``most`` mutations (a deep copy; ``doc`` is left alone)."""
    out = copy.deepcopy(doc)
    for _ in range(draw(st.integers(min_value=1, max_value=most))):
        slots = _containers(out)
        if not slots:
            break
        node, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "replace", "delete", "add"]))
        if action == "replace":
            node[key] = draw(replacements)
        elif action == "delete":
            del node[key]
        elif isinstance(node, dict):
            node[draw(st.text(min_size=1, max_size=12))] = draw(replacements)
        else:
            node.insert(key, draw(replacements))
    return out
