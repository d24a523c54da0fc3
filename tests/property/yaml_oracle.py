"""The test oracle for the YAML reader: the reader as it was before it read in one pass.

PyYAML's composer and safe constructor, with kubectl's YAML 1.1 table of plain scalars (its own
copy, so the production table cannot drift unnoticed), keys spelled as JSON, duplicate keys and
the tags with no JSON form refused; a first walk over the events refuses a stream past the
limits. Slow (it parses twice and builds a node graph) and only ever used by the tests, which
compare :func:`gpustack_render.cli.yamlread.load_all` with :func:`load_all` here.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError

from gpustack_render.cli.yamlread import LimitError

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class OracleLoader(_Base):  # type: ignore[misc]
    """The safe loader with kubectl's scalars and duplicate keys refused."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}
    bool_values: ClassVar[dict[str, bool]] = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

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
            key = _spell(self.construct_object(key_node, deep=True), key_node)
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


_KEY_SPELLING: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _spell(key: Any, node: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return _KEY_SPELLING[key]
    if isinstance(key, int | float):
        return str(key)
    raise ConstructorError(None, None, "a mapping key must be a scalar", node.start_mark)


OracleLoader.yaml_constructors = dict(OracleLoader.yaml_constructors)
OracleLoader.add_constructor("tag:yaml.org,2002:map", OracleLoader.construct_yaml_map)
for _tag in ("binary", "set", "timestamp", "omap", "pairs"):
    OracleLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", OracleLoader.refuse)


def _resolver(tag: str, pattern: str, first: str) -> None:
    OracleLoader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern, re.X), first)


_BOOLS = "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF"
_resolver("bool", "^(?:" + "|".join(_BOOLS.split()) + ")$", "yYnNtTfFoO")
_resolver(
    "int",
    r"^[-+]?(?:0b[01_]+|0o?[0-7_]+|0x[0-9a-fA-F_]+|0|[1-9][0-9_]*)$",
    "-+0123456789",
)
_resolver(
    "float",
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    "-+0123456789.",
)
_resolver("merge", r"^(?:<<)$", "<")
OracleLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


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
