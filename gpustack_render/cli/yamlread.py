"""Reading YAML as kubectl does: libyaml's C parser, YAML 1.1 scalars, and bounded work.

kubectl (and the API server) read YAML with a YAML 1.1 resolver: ``yes``/``no``/``on``/``off``
and ``y``/``n`` in any of their three casings are booleans, ``0755`` is octal, a timestamp-looking
scalar stays a string. This module reproduces that resolver exactly, refuses a mapping that
repeats a key and, before anything is built, walks the parser's events once to refuse a stream
past the document count, the nesting depth or the node budget (aliases counted at their
expanded size), so neither an alias bomb nor deep nesting can exhaust time or the stack.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.constructor import ConstructorError

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class LimitError(ValueError):
    """A stream past one of the reader's limits; the message is one line."""


class _Loader(_Base):  # type: ignore[misc]
    """The safe loader with kubectl's scalars and duplicate keys refused."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}
    bool_values: ClassVar[dict[str, bool]] = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[str, Any]:
        """A mapping keyed as the JSON the API server receives spells its keys (``on`` is
        ``"true"``, ``1`` is ``"1"``), a repeated key refused; merge keys (``<<``) override."""
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


#: How Go's YAML-to-JSON conversion spells a key that is not a string.
_KEY_SPELLING: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _spell(key: Any, node: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool) or key is None:
        return _KEY_SPELLING[key]
    if isinstance(key, int | float):
        return str(key)
    raise ConstructorError(None, None, "a mapping key must be a scalar", node.start_mark)


_Loader.yaml_constructors = dict(_Loader.yaml_constructors)
_Loader.add_constructor("tag:yaml.org,2002:map", _Loader.construct_yaml_map)
for _tag in ("binary", "set", "timestamp", "omap", "pairs"):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _Loader.refuse)


def _resolver(tag: str, pattern: str, first: str) -> None:
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern, re.X), first)


# go-yaml v2's table (the one kubectl's sigs.k8s.io/yaml uses).
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
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]
)


def implicit_resolvers() -> dict[str | None, list[tuple[str, re.Pattern[str]]]]:
    """kubectl's plain-scalar resolution, for a writer that must quote what it would misread."""
    return _Loader.yaml_implicit_resolvers


def _check(text: str, *, max_documents: int, max_depth: int, max_nodes: int) -> None:
    """Walk the events once; raise :class:`LimitError` past a limit."""
    documents = 0
    nodes = 0
    stack: list[list[Any]] = []  # [anchor, expanded size] of each open collection
    sizes: dict[str, int] = {}
    for event in yaml.parse(text, Loader=_Loader):
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
                continue  # undefined: the loader refuses it with its own message
            size = sizes[event.anchor]
            nodes += size
        if size and stack and not isinstance(event, yaml.CollectionStartEvent):
            stack[-1][1] += size
        if nodes > max_nodes:
            raise LimitError(f"more than {max_nodes} nodes once aliases are expanded")


def load_all(text: str, *, max_documents: int, max_depth: int, max_nodes: int) -> list[Any]:
    """Every document of ``text``, after :func:`_check`; raises :class:`yaml.YAMLError` for
    input that is not YAML and :class:`LimitError` past a limit."""
    try:
        _check(text, max_documents=max_documents, max_depth=max_depth, max_nodes=max_nodes)
        return list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        if "maximum nesting depth" in str(exc):
            raise LimitError(f"nested deeper than {max_depth} levels") from exc
        raise


def depth(value: Any) -> int:
    """How deep ``value`` nests (a scalar is 0), without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 0)]
    while todo:
        item, level = todo.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, level + 1)
        todo.extend((child, level + 1) for child in children)
    return deepest
