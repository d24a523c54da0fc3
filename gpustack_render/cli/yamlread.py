"""Reading YAML as kubectl does: libyaml's C parser, YAML 1.1 scalars, and bounded work.

kubectl (and the API server) read YAML with a YAML 1.1 resolver: ``yes``/``no``/``on``/``off``
and ``y``/``n`` in any of their three casings are booleans, ``0755`` is octal, a timestamp-looking
scalar stays a string. This module reproduces that resolver exactly, refuses a mapping that
repeats a key, and spells every key as the JSON the API server receives.

The text is read in one pass over libyaml's parser events: the values are built straight from
the events (no node graph, no second parse) while the limits are counted as they go: the
document count, the nesting depth and the node budget, an alias counting as every node of what
it names, so neither an alias bomb nor deep nesting can exhaust time or the stack. An alias
gives the very object its anchor built (as PyYAML's constructor does), never a copy. A plain
scalar goes to the table only if it starts with a character the table resolves, and each text
is resolved once per stream.

Every value, tag and refusal is PyYAML's safe constructor's (its messages too), with three
deliberate exceptions: a number or boolean its tag cannot read (``0x_``, ``!!int x``) is a
:class:`yaml.YAMLError` naming the scalar, where PyYAML let a ``ValueError`` out; merge keys
follow go-yaml's rules whatever the PyYAML release (in the order of the text: a merge sets its
keys over the own keys before it, an own key after it wins; of a list, the first mapping
listed; a merged mapping is merged as it reads), where PyYAML let own keys win wherever they
stand and its releases disagree on the rest; and a
mapping under a scalar tag is refused, where PyYAML read its ``!!value`` entry.

Which error a stream gets is decided as a two-pass reader decides it: a syntax error or a limit
anywhere in the stream comes first; then, document by document, an anchor or alias error
(``found undefined alias``, ``found duplicate anchor``), then the first error of a value in the
text (a repeated key, a refused tag, a key that is not a scalar, a merge of something that is no
mapping).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from gpustack_render.cli.gcpause import paused_gc

_Base: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


class LimitError(ValueError):
    """A stream past one of the reader's limits; the message is one line."""


class _Loader(_Base):  # type: ignore[misc]
    """libyaml's parser (its events are all the reader takes) and kubectl's table of plain
    scalars, which the writer reads too."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}


_T = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_T + t for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ, _MERGE, _VALUE = (_T + t for t in ("map", "seq", "merge", "value"))
#: Tags with no JSON form: refused wherever they are read.
_REFUSED = frozenset(_T + t for t in ("binary", "set", "timestamp", "omap", "pairs"))
_SCALAR_TAGS = frozenset((_STR, _INT, _FLOAT, _BOOL, _NULL))


def _resolver(tag: str, pattern: str, first: str) -> None:
    _Loader.add_implicit_resolver(f"{_T}{tag}", re.compile(pattern, re.X), first)


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
_Loader.add_implicit_resolver(_NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])

_TABLE = _Loader.yaml_implicit_resolvers
#: The first characters the table resolves; a plain scalar starting with any other is a string
#: (``""`` is in any string, so the empty scalar goes to the table too).
_FIRST = "".join(sorted(k for k in _TABLE if k))
_BOOL_VALUES: dict[str, bool] = {**SafeConstructor.bool_values, "y": True, "n": False}


def implicit_resolvers() -> dict[str | None, list[tuple[str, re.Pattern[str]]]]:
    """kubectl's plain-scalar resolution, for a writer that must quote what it would misread."""
    return _TABLE


def _int(text: str) -> int:
    """A YAML 1.1 integer, spelled as PyYAML's constructor reads it (``0755`` octal, ``0x``,
    ``0b``, underscores, ``1:20`` sexagesimal under an explicit tag)."""
    value = text.replace("_", "")
    sign = -1 if value[0] == "-" else 1
    if value[0] in "+-":
        value = value[1:]
    if value == "0":
        return 0
    if value.startswith("0b"):
        return sign * int(value[2:], 2)
    if value.startswith("0x"):
        return sign * int(value[2:], 16)
    if value[0] == "0":
        return sign * int(value, 8)
    if ":" in value:
        return sign * int(_base60(value, int))
    return sign * int(value)


def _float(text: str) -> float:
    """A YAML 1.1 float, as PyYAML's constructor reads it (``.inf``, ``.nan``, sexagesimal)."""
    value = text.replace("_", "").lower()
    sign = -1 if value[0] == "-" else 1
    if value[0] in "+-":
        value = value[1:]
    if value == ".inf":
        return sign * float(SafeConstructor.inf_value)
    if value == ".nan":
        return float(SafeConstructor.nan_value)
    if ":" in value:
        return sign * float(_base60(value, float))
    return sign * float(value)


def _base60(value: str, number: Any) -> Any:
    """``1:20`` is 80: YAML 1.1's sexagesimal numbers (read under an explicit tag only)."""
    total, base = number(0), 1
    for part in reversed(value.split(":")):
        total += number(part) * base
        base *= 60
    return total


def _bool(text: str) -> bool:
    return _BOOL_VALUES[text.lower()]


_CONVERT: dict[str, Any] = {_INT: _int, _FLOAT: _float, _BOOL: _bool}
#: Returned by :func:`_plain` for a scalar the slow path must read (a merge key, a bad number).
_SLOW: Any = object()


def _resolve(text: str) -> str:
    """The tag of a plain scalar: the first pattern of the table that matches, else a string."""
    for tag, pattern in _TABLE.get(text[:1], ()):
        if pattern.match(text):
            return tag
    return _STR


def _plain(text: str) -> Any:
    """The value of an untagged plain scalar, or :data:`_SLOW`."""
    tag = _resolve(text)
    if tag == _STR:
        return text
    if tag == _NULL:
        return None
    convert = _CONVERT.get(tag)
    if convert is None:
        return _SLOW
    try:
        return convert(text)
    except (ValueError, IndexError, KeyError):
        return _SLOW


#: How Go's YAML-to-JSON conversion spells a key that is not a string.
_KEY_SPELLING: dict[Any, str] = {True: "true", False: "false", None: "null"}


def _spell(key: Any) -> str:
    if isinstance(key, bool) or key is None:
        return _KEY_SPELLING[key]
    return str(key)


class _Node:
    """A node already read, as whatever refers to it again needs it: an alias (its value, its
    expanded size, its error if it is read), a merge (a mapping's value and the error of its
    entries, a sequence's items) or a key (its tag and text)."""

    __slots__ = ("body", "err", "items", "kind", "mark", "raw", "size", "tag", "value")

    def __init__(self, value: Any, kind: str, mark: Any, tag: str | None = None) -> None:
        self.value = value
        self.kind = kind  # "scalar", "sequence" or "mapping", as PyYAML's messages name them
        self.err: Exception | None = None  # the error of reading it as a value
        self.body: Exception | None = None  # the error of merging it (a mapping's entries)
        self.items: list[_Node] | None = None  # a sequence's items, when kept for a merge
        self.mark = mark
        self.size = 1
        self.tag = tag
        self.raw: str | None = None


class _Open:
    """What an open collection needs besides its container; only off the common path (an
    anchor, a tag, a key that is a collection, an error below it, a merge, a repeated key)."""

    __slots__ = ("anchor", "body_err", "event", "items", "kind", "merges", "node_err", "start")

    def __init__(self, kind: str, event: Any) -> None:
        self.kind = kind
        self.event = event
        self.anchor: str | None = None
        self.start = 0
        self.node_err: Exception | None = None  # a repeated key: only if it is read as a value
        self.body_err: Exception | None = None  # its entries or items: also when merged
        #: The merge keys' mappings, in order, each with how many own keys came before it.
        self.merges: list[tuple[int, list[dict[str, Any]]]] | None = None
        self.items: list[_Node] | None = None  # a sequence's items, kept for a merge


def _error(problem: str, mark: Any, *, context: Any = None) -> Exception:
    """A constructor error as PyYAML's constructor words it (``context`` is the mapping's
    mark, for an error of one of its keys)."""
    error: Exception = ConstructorError(
        None if context is None else "while constructing a mapping", context, problem, mark
    )
    return error


def _composer_error(context: str | None, context_mark: Any, problem: str, mark: Any) -> Exception:
    """An anchor or alias error, as libyaml's composer words it."""
    error: Exception = ComposerError(context, context_mark, problem, mark)
    return error


def _tag_error(tag: str | None, kind: str, mark: Any) -> Exception | None:
    """The error PyYAML's safe constructor raises for a collection of ``kind`` under ``tag``."""
    if tag is None or tag == "!" or (tag, kind) in ((_MAP, "mapping"), (_SEQ, "sequence")):
        return None
    if tag == _MAP:
        problem = f"expected a mapping, found {kind}"
    elif tag == _SEQ:
        problem = f"expected a sequence node, but found {kind}"
    elif tag in _SCALAR_TAGS:
        problem = f"expected a scalar node, but found {kind}"
    else:
        return _tag_refused(tag, mark)
    return _error(problem, mark)


def _tag_refused(tag: str, mark: Any) -> Exception:
    if tag in _REFUSED:
        problem = f"{tag} has no JSON form (the API server reads JSON)"
    else:
        problem = f"could not determine a constructor for the tag {tag!r}"
    return _error(problem, mark)


def _scalar(event: Any) -> _Node:
    """A scalar with a tag, an anchor or a value only the slow path reads."""
    text: str = event.value
    tag: str = event.tag
    mark = event.start_mark
    if tag is None or tag == "!":
        tag = _resolve(text) if event.implicit[0] else _STR
    node = _Node(None, "scalar", mark, tag)
    node.raw = text
    if tag == _STR:
        node.value = text
    elif tag == _NULL:
        pass
    elif tag in _CONVERT:
        try:
            node.value = _CONVERT[tag](text)
        except (ValueError, IndexError, KeyError):
            node.err = _error(f"{text!r} is not a valid {tag}", mark)
    elif tag == _MAP:
        node.err = _error("expected a mapping, found scalar", mark)
    elif tag == _SEQ:
        node.err = _error("expected a sequence node, but found scalar", mark)
    else:
        node.err = _tag_refused(tag, mark)
    return node


def _first(a: Exception | None, b: Exception | None) -> Exception | None:
    return a if a is not None else b


class _Reader:
    """One stream's reading: the limits, the anchors of the current document and the first
    anchor or alias error in it. :meth:`read` is the loop over the events; the methods below it
    are the paths off the common one."""

    def __init__(self, *, max_documents: int, max_depth: int, max_nodes: int) -> None:
        self.max_documents = max_documents
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.anchors: dict[str, _Node] = {}
        self.opened: dict[str, Any] = {}  # anchor of an open collection -> its start mark
        self.composer_err: Exception | None = None

    def read(self, text: str) -> list[Any]:  # noqa: C901  (one loop, hot)
        get = _Loader(text).get_event
        max_depth, max_nodes = self.max_depth, self.max_nodes
        nodes = documents = 0
        docs: list[Any] = []
        pending: Exception | None = None
        cache: dict[str, Any] = {}
        cache_get = cache.get
        nokey = _NOKEY
        first = _FIRST
        # A frame: the parent's container, its kind (True a dict, False a list, None a
        # container whose children take the slow path), the key the node goes under, the
        # node's start event, and its _Open (None on the common path).
        root: list[Any] = [None, None, None, None, _Open("sequence", None)]
        stack: list[list[Any]] = [root]
        top = root
        holder: list[Any] = []
        cur: Any = holder
        is_map: bool | None = False
        key: Any = nokey
        while True:
            event = get()
            cls = type(event)
            if cls is ScalarEvent:
                nodes += 1
                if nodes > max_nodes:
                    raise LimitError(f"more than {max_nodes} nodes once aliases are expanded")
                if event.anchor is None and event.tag is None:
                    value = event.value
                    if event.style == "" and value[:1] in first:
                        r = cache_get(value, _MISS)
                        if r is _MISS:
                            r = _plain(value)
                            if r is _SLOW:
                                key, is_map = self.place(_scalar(event), top, cur, is_map, key)
                                continue
                            cache[value] = r
                    else:
                        r = value
                    if is_map:
                        if key is nokey:
                            key = r if type(r) is str else _spell(r)
                            if key in cur:
                                self.duplicate(top, key, event.start_mark)
                        else:
                            cur[key] = r
                            key = nokey
                    elif is_map is False:
                        cur.append(r)
                    else:
                        node = _Node(r, "scalar", event.start_mark)
                        key, is_map = self.place(node, top, cur, is_map, key)
                else:
                    node = self.anchored(_scalar(event), event.anchor)
                    key, is_map = self.place(node, top, cur, is_map, key)
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                if len(stack) > max_depth:
                    raise LimitError(f"nested deeper than {max_depth} levels")
                nodes += 1
                if nodes > max_nodes:
                    raise LimitError(f"more than {max_nodes} nodes once aliases are expanded")
                frame = [cur, is_map, key, event, None]
                is_mapping = cls is MappingStartEvent
                if (
                    event.anchor is not None
                    or event.tag is not None
                    or is_map is None
                    or (is_map and key is nokey)
                ):
                    frame[4] = info = self.open(event, is_mapping, key, nodes)
                    collect = info.items is not None
                else:
                    collect = False
                stack.append(frame)
                top = frame
                if is_mapping:
                    cur = {}
                    is_map = True
                else:
                    cur = []
                    is_map = None if collect else False
                key = nokey
            elif cls is MappingEndEvent or cls is SequenceEndEvent:
                frame = stack.pop()
                value = cur
                cur, is_map, key = frame[0], frame[1], frame[2]
                top = stack[-1]
                if frame[4] is None:  # so the parent is a plain dict or list (see open)
                    if is_map:
                        cur[key] = value
                        key = nokey
                    else:
                        cur.append(value)
                else:
                    node = self.close(frame, value, nodes)
                    key, is_map = self.place(node, top, cur, is_map, key)
            elif cls is AliasEvent:
                anchor = event.anchor
                target = self.anchors.get(anchor)
                if target is None:
                    if anchor in self.opened:
                        raise LimitError(f"alias *{anchor} refers to itself")
                    if self.composer_err is None:
                        self.composer_err = _composer_error(
                            None, None, "found undefined alias", event.start_mark
                        )
                    target = _Node(None, "scalar", event.start_mark)
                else:
                    nodes += target.size
                    if nodes > max_nodes:
                        raise LimitError(f"more than {max_nodes} nodes once aliases are expanded")
                key, is_map = self.place(target, top, cur, is_map, key)
            elif cls is DocumentStartEvent:
                documents += 1
                if documents > self.max_documents:
                    raise LimitError(f"more than {self.max_documents} documents")
                self.anchors = {}
                self.opened = {}
                self.composer_err = None
                root[4] = _Open("sequence", None)
                holder = []
                cur, is_map, key = holder, False, nokey
            elif cls is DocumentEndEvent:
                docs.append(holder[0] if holder else None)
                if pending is None:
                    pending = _first(self.composer_err, root[4].body_err)
            elif cls is StreamEndEvent:
                break
        if pending is not None:
            raise pending
        return docs

    # --- off the common path ------------------------------------------------------------------

    def anchored(self, node: _Node, anchor: str | None) -> _Node:
        """``node`` under its anchor (a second anchor of one name is a composer error)."""
        if anchor is not None:
            self.check_anchor(anchor, node.mark)
            self.anchors[anchor] = node
        return node

    def check_anchor(self, anchor: str, mark: Any) -> None:
        before = self.anchors[anchor].mark if anchor in self.anchors else self.opened.get(anchor)
        if before is not None and self.composer_err is None:
            self.composer_err = _composer_error(
                "found duplicate anchor; first occurrence", before, "second occurrence", mark
            )

    def open(self, event: Any, is_mapping: bool, key: Any, nodes: int) -> _Open:
        info = _Open("mapping" if is_mapping else "sequence", event)
        if event.anchor is not None:
            self.check_anchor(event.anchor, event.start_mark)
            self.opened[event.anchor] = event.start_mark
            info.anchor = event.anchor
            info.start = nodes
        if not is_mapping and (info.anchor is not None or key is _MERGEKEY):
            # Its items are kept for a merge (now, or later through an alias).
            info.items = []
        return info

    def info(self, frame: list[Any]) -> _Open:
        info: _Open | None = frame[4]
        if info is None:
            event = frame[3]
            info = frame[4] = _Open(
                "mapping" if type(event) is MappingStartEvent else "sequence", event
            )
        return info

    def fail(self, frame: list[Any], err: Exception | None) -> None:
        """An error in what ``frame``'s node reads (its entries or items)."""
        if err is not None:
            info = self.info(frame)
            if info.body_err is None:
                info.body_err = err

    def duplicate(self, frame: list[Any], key: str, mark: Any) -> None:
        info = self.info(frame)
        if info.node_err is None:
            info.node_err = _error(
                f"found duplicate key {key!r}", mark, context=info.event.start_mark
            )

    def close(self, frame: list[Any], value: Any, nodes: int) -> _Node:
        """The node of a collection that took the slow path, with its merges applied as go-yaml
        applies them (sigs.k8s.io/yaml's, so kubectl's): in the order of the text, a merge key
        sets every key of its mappings (of a list, the first listed wins) over the own keys
        before it, and an own key after it sets its own value. The keys come in the order
        PyYAML gives them: the merged ones first, then the other own ones."""
        info: _Open = frame[4]
        event = frame[3]
        mark = event.start_mark
        tag = event.tag
        node = _Node(value, info.kind, mark, tag)
        if info.merges:
            node.value = _merged(value, info.merges)
        node.items = info.items
        node.err = _first(_first(_tag_error(tag, info.kind, mark), info.node_err), info.body_err)
        node.body = info.body_err
        if info.anchor is not None:
            node.size = nodes - info.start + 1
            self.opened.pop(info.anchor, None)
            self.anchors[info.anchor] = node
        return node

    def place(
        self, node: _Node, top: list[Any], cur: Any, is_map: bool | None, key: Any
    ) -> tuple[Any, bool | None]:
        """Put ``node`` where the parent expects it: a key, a merge, a value or an item.
        Returns the parent's next key and kind."""
        info: _Open | None = top[4]
        if is_map is None and info is not None and info.kind == "sequence":
            cur.append(node.value)
            self.fail(top, node.err)
            assert info.items is not None
            info.items.append(node)
            return key, is_map
        if is_map is None or key is _MERGEKEY:
            self.merge(top, node, len(cur))
            return _NOKEY, True
        if not is_map:
            cur.append(node.value)
            self.fail(top, node.err)
            return key, is_map
        if key is not _NOKEY:
            cur[key] = node.value
            self.fail(top, node.err)
            return _NOKEY, is_map
        if node.tag == _MERGE:
            return _MERGEKEY, None
        if node.tag == _VALUE and node.kind == "scalar":
            # PyYAML retags a ``!!value`` key a string in place: an alias of it reads so too.
            assert node.raw is not None
            spelled = node.value = node.raw
            node.tag, node.err = _STR, None
        elif node.tag == _VALUE:
            problem = f"expected a scalar node, but found {node.kind}"
            self.fail(top, _error(problem, node.mark))
            return _BADKEY, is_map
        elif node.err is not None:
            self.fail(top, node.err)
            return _BADKEY, is_map
        elif node.kind != "scalar":
            problem = "a mapping key must be a scalar"
            self.fail(top, _error(problem, node.mark))
            return _BADKEY, is_map
        else:
            spelled = node.value if type(node.value) is str else _spell(node.value)
        if spelled in cur:
            self.duplicate(top, spelled, node.mark)
        return spelled, is_map

    def merge(self, top: list[Any], node: _Node, own_before: int) -> None:
        """A merge key's value: a mapping, or a list of mappings; ``own_before`` own keys of the
        mapping came before it."""
        info = self.info(top)
        if info.merges is None:
            info.merges = []
        mark = info.event.start_mark
        if node.kind == "mapping":
            info.merges.append((own_before, [node.value]))
            self.fail(top, node.body)
        elif node.kind == "sequence":
            sources: list[dict[str, Any]] = []
            for item in node.items or ():
                if item.kind != "mapping":
                    problem = f"expected a mapping for merging, but found {item.kind}"
                    self.fail(top, _error(problem, item.mark, context=mark))
                    return
                sources.append(item.value)
                self.fail(top, item.body)
            info.merges.append((own_before, sources))
        else:
            problem = f"expected a mapping or list of mappings for merging, but found {node.kind}"
            self.fail(top, _error(problem, node.mark, context=mark))


def _merged(own: dict[str, Any], merges: list[tuple[int, list[dict[str, Any]]]]) -> dict[str, Any]:
    """A mapping's own keys and its merges, each merge written over the own keys before it
    (go-yaml's order; a repeated own key is refused before this)."""
    final: dict[str, Any] = {}
    own_items = list(own.items())
    done = 0
    for own_before, sources in merges:
        final.update(own_items[done:own_before])
        done = max(done, own_before)
        for source in reversed(sources):
            final.update(source)
    final.update(own_items[done:])
    order: dict[str, Any] = {}
    for _, sources in merges:
        for source in sources:
            for k in source:
                order.setdefault(k, None)
    order.update(dict.fromkeys(own))
    return {k: final[k] for k in order}


_NOKEY: Any = object()  # a mapping waits for a key
_MERGEKEY: Any = object()  # the key read is a merge key (<<): its value is merged
_BADKEY: Any = object()  # the key could not be read: the value is read (for its errors) and dropped
_MISS: Any = object()


def load_all(text: str, *, max_documents: int, max_depth: int, max_nodes: int) -> list[Any]:
    """Every document of ``text``; raises :class:`yaml.YAMLError` for input that is not YAML
    and :class:`LimitError` past a limit. The collector is paused while the values are built:
    a large export is hundreds of thousands of dicts and lists, none in a cycle."""
    reader = _Reader(max_documents=max_documents, max_depth=max_depth, max_nodes=max_nodes)
    try:
        with paused_gc():
            return reader.read(text)
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
