"""The test oracle for the YAML reader: the reader as it was before it read in one pass.
PyYAML's composer and safe constructor, with kubectl's plain scalars, keys spelled as JSON,
duplicate keys and the tags with no JSON form refused; a first walk over the events refuses a
stream past the limits. Slow (it parses twice and builds a node graph) and only ever used by the
tests, which compare :func:`gpustack_render.cli.yamlread.load_all` with :func:`load_all` here.

What a scalar is (go-yaml's resolver: :func:`gpustack_render.cli.yamlread.resolve`, and its rule
for a scalar under an explicit tag) is taken from the reader: it is checked against kubectl's
own converter (tests/integration/test_yaml_kubectl.py), and this oracle checks what the one
pass does with it: structure, order, aliases, merges and which error a stream gets.
"""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError

from gpustack_render.cli import yamlread
from gpustack_render.cli.yamlread import LimitError

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class OracleLoader(_Base):  # type: ignore[misc]
    """The safe loader with kubectl's scalars and duplicate keys refused."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[str, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise ConstructorError(
                None, None, f"expected a mapping, found {node.id}", node.start_mark
            )
        own = {id(k) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"}
        self.flatten_mapping(node)
        out: dict[str, Any] = {}
        seen: set[str] = set()
        for key_node, value_node in node.value:
            key = self.construct_key(key_node)
            if id(key_node) in own:
                if key in seen:
                    raise ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
            out[key] = self.construct_object(value_node, deep=deep)
        return out

    def construct_yaml_map(self, node: Any) -> Any:
        data: dict[str, Any] = {}
        yield data
        data.update(self.construct_mapping(node))

    def refuse(self, node: Any) -> Any:
        raise ConstructorError(
            None, None, f"{node.tag} has no JSON form (the API server reads JSON)", node.start_mark
        )

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        """go-yaml's resolver for a plain scalar (``<<`` is the merge key)."""
        if kind is yaml.ScalarNode and implicit[0]:
            if value == "<<":
                return _T + "merge"
            return _KINDS[type(yamlread.resolve(value))]
        return super().resolve(kind, value, implicit)

    def scalar_value(self, node: Any) -> Any:
        """A scalar under its tag as go-yaml reads it; a refusal names the scalar."""
        try:
            return yamlread._tagged(node.value, node.tag)
        except ValueError:
            raise ConstructorError(
                None, None, f"{node.value!r} is not a valid {node.tag}", node.start_mark
            ) from None

    def construct_json_scalar(self, node: Any) -> Any:
        value = self.scalar_value(node)
        if isinstance(value, float) and not math.isfinite(value):
            problem = f"{node.value!r} has no JSON form (JSON has no infinity or NaN)"
            raise ConstructorError(None, None, problem, node.start_mark)
        return value

    def construct_merge_value(self, node: Any) -> str:
        """``<<`` as a value is the string (go-yaml's merge key is a key only)."""
        return str(node.value)

    def construct_key(self, node: Any) -> str:
        if isinstance(node, yaml.ScalarNode) and node.tag in _KINDS.values():
            value = self.scalar_value(node)  # an infinity is a key (".inf")
        else:
            value = self.construct_object(node, deep=True)
        if not isinstance(value, str | int | float | bool | None):
            raise ConstructorError(None, None, "a mapping key must be a scalar", node.start_mark)
        spelled = yamlread._key(value)
        if spelled is None:
            problem = (
                "a null key has no JSON form (kubectl refuses it)"
                if value is None
                else f"the key {value} has no JSON form (kubectl refuses an integer key past "
                "2**63 - 1)"
            )
            raise ConstructorError(None, None, problem, node.start_mark)
        return spelled


_T = "tag:yaml.org,2002:"
_KINDS: dict[type, str] = {
    str: _T + "str",
    bool: _T + "bool",
    int: _T + "int",
    float: _T + "float",
    type(None): _T + "null",
}


OracleLoader.yaml_constructors = dict(OracleLoader.yaml_constructors)
OracleLoader.add_constructor("tag:yaml.org,2002:map", OracleLoader.construct_yaml_map)
for _tag in ("binary", "set", "timestamp", "omap", "pairs"):
    OracleLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", OracleLoader.refuse)
OracleLoader.add_constructor(_T + "merge", OracleLoader.construct_merge_value)
for _tag in ("bool", "int", "float", "null"):
    OracleLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", OracleLoader.construct_json_scalar)


def _check(text: str, *, max_documents: int, max_depth: int, max_nodes: int) -> None:
    documents = 0
    nodes = 0
    stack: list[list[Any]] = []
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=OracleLoader):
        size = 0
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            sizes.clear()
            if documents > max_documents:
                raise LimitError(f"more than {max_documents} documents")
        elif isinstance(event, yaml.CollectionStartEvent):
            stack.append([event.anchor, 1])
            if len(stack) > max_depth:
                raise LimitError(f"nested deeper than {max_depth} levels")
            nodes += 1
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size = stack.pop()
            if anchor is not None:
                sizes[anchor] = size
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            nodes += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor not in sizes:
                if any(frame[0] == event.anchor for frame in stack):
                    raise LimitError(f"alias *{event.anchor} refers to itself")
                continue
            size = sizes[event.anchor]
            nodes += size
        if size and stack and not isinstance(event, yaml.CollectionStartEvent):
            stack[-1][1] += size
        if nodes > max_nodes:
            raise LimitError(f"more than {max_nodes} nodes once aliases are expanded")


def load_all(text: str, *, max_documents: int, max_depth: int, max_nodes: int) -> list[Any]:
    """Every document of ``text``, as the two-pass reader read it."""
    try:
        _check(text, max_documents=max_documents, max_depth=max_depth, max_nodes=max_nodes)
        return list(yaml.load_all(text, Loader=OracleLoader))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise LimitError(f"nested deeper than {max_depth} levels") from exc
        raise
