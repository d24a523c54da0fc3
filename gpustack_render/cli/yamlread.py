"""Reading YAML as kubectl does: libyaml's C parser, go-yaml v2's scalars, and bounded work.

kubectl reads YAML with sigs.k8s.io/yaml's YAMLToJSON over go.yaml.in/yaml/v2 (non-strict).
:func:`resolve` is go-yaml's resolver, rule for rule: ``yes``/``no``/``on``/``off`` and
``y``/``n`` in any of their three casings are booleans; a scalar starting with a digit or a sign
is whatever Go's ``ParseInt``/``ParseUint``/``ParseFloat`` make of it once its underscores are
gone (``0755`` and ``0o755`` octal, ``0X1F`` hex, ``08`` the number 8, ``0x_`` the string
``"0x_"``, a number past uint64 a float); a date stays a string. An explicit scalar tag must name
what its text reads as (``!!float`` takes an integer too), else the scalar is refused. A key is
spelled as the JSON kubectl sends (``on:`` is ``"true"``, ``1.0:`` is ``"1"``); what kubectl
cannot send is refused: a null key, an integer key past int64, an infinity or NaN as a value.
Merge keys follow go-yaml (in the order of the text: a merge sets its keys over the own keys
before it, an own key after it wins; of a list, the first mapping listed; an alias of a list is
refused). tests/integration/test_yaml_kubectl.py compares the reader with kubectl's converter.

Deliberately stricter than kubectl: a repeated key (once spelled as JSON; kubectl keeps the last,
or one at random), in a merged mapping too; an anchor defined twice; ``!!binary``,
``!!timestamp``, ``!!set``, ``!!omap``, ``!!pairs`` and unknown tags; a collection under a tag
that contradicts it; ``!!merge`` on a key other than ``<<``. Each is refused naming its line.

The text is read in one pass over libyaml's parser events: the values are built straight from
the events (no node graph, no second parse) while the limits are counted as they go: the
document count, the nesting depth and the node budget, an alias counting as every node of what
it names, so neither an alias bomb nor deep nesting can exhaust time or the stack. An alias
gives the very object its anchor built, never a copy. A plain scalar is resolved only if it
starts with a character that can make it something other than a string, and each text is
resolved once per stream.

Which error a stream gets is decided as a two-pass reader decides it: a syntax error or a limit
anywhere in the stream comes first; then, document by document, an anchor or alias error
(``found undefined alias``, ``found duplicate anchor``), then the first error of a value in the
text (a repeated key, a refused tag, a key that is not a scalar, a merge of something that is no
mapping). The messages are PyYAML's constructor's.
"""

from __future__ import annotations

import math
import re
import struct
from typing import Any, ClassVar

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError
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

from gpustack_kube.gcpause import paused_gc

_Base: Any = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


class LimitError(ValueError):
    """A stream past one of the reader's limits; the message is one line."""


class _Loader(_Base):  # type: ignore[misc]
    """libyaml's parser (its events are all the reader takes), and the table of patterns of
    kubectl's plain scalars that the writer quotes (:func:`implicit_resolvers`)."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {}


_T = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_T + t for t in ("str", "int", "float", "bool", "null"))
_MAP, _SEQ, _MERGE, _VALUE = (_T + t for t in ("map", "seq", "merge", "value"))
#: Tags with no JSON form: refused wherever they are read.
_REFUSED = frozenset(_T + t for t in ("binary", "set", "timestamp", "omap", "pairs"))
_SCALAR_TAGS = frozenset((_STR, _INT, _FLOAT, _BOOL, _NULL))


def _resolver(tag: str, pattern: str, first: str) -> None:
    _Loader.add_implicit_resolver(f"{_T}{tag}", re.compile(pattern, re.X), first)


# The writer's table (see implicit_resolvers): go-yaml v2's words and number shapes as regular
# expressions, for a writer that must quote a string kubectl would read as something else.
_TRUE = "y Y yes Yes YES true True TRUE on On ON"
_FALSE = "n N no No NO false False FALSE off Off OFF"
_BOOLS = f"{_TRUE} {_FALSE}"
_resolver("bool", "^(?:" + "|".join(_BOOLS.split()) + ")$", "yYnNtTfFoO")
_resolver(
    "int",
    # go-yaml drops every underscore first, so one may stand before a base prefix (0_x1 is 1).
    r"^[-+]?_*(?:0_*[bB]_*[-+]?[01_]+|0_*[oO]?[0-7_]+|0_*[xX][0-9a-fA-F_]+|0_*|[1-9_][0-9_]*)$",
    "-+0123456789",
)
_resolver(
    "float",
    r"^(?:[-+]?(?:\.[0-9]+|[0-9_]+(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9_]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
    "-+0123456789.",
)
_resolver("merge", r"^(?:<<)$", "<")
_Loader.add_implicit_resolver(_NULL, re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])

_TABLE = _Loader.yaml_implicit_resolvers


def implicit_resolvers() -> dict[str | None, list[tuple[str, re.Pattern[str]]]]:
    """kubectl's plain scalars as a table of patterns, for a writer that must quote what it
    would misread: every plain scalar :func:`resolve` reads as no string matches one (the
    table matches some more, which the writer then quotes needlessly but harmlessly)."""
    return _TABLE


# --- go-yaml v2's resolver (go.yaml.in/yaml/v2 resolve.go), which kubectl's sigs.k8s.io/yaml
# calls: a word table, then the first character decides what else a plain scalar may be.
_WORDS: dict[str, Any] = {
    **dict.fromkeys(_TRUE.split(), True),
    **dict.fromkeys(_FALSE.split(), False),
    **dict.fromkeys(["", "~", "null", "Null", "NULL"], None),
    **dict.fromkeys([".nan", ".NaN", ".NAN"], math.nan),
    **dict.fromkeys([".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"], math.inf),
    **dict.fromkeys(["-.inf", "-.Inf", "-.INF"], -math.inf),
}
#: The first characters that can make a plain scalar anything but a string (``<`` for the
#: merge key ``<<``; ``""`` is in any string, so the empty scalar is looked up too).
_FIRST = "+-0123456789yYnNtTfFoO~.<"
_NUMBER_FIRST = "+-0123456789"
#: go-yaml's yamlStyleFloat, and what strconv.ParseFloat takes of a text starting with ``.``.
_FLOAT_SHAPE = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?\Z")
#: (Go's syntax: an underscore only between two digits.)
_DOT_FLOAT = re.compile(r"\.[0-9](?:_?[0-9])*(?:[eE][-+]?[0-9](?:_?[0-9])*)?\Z")
_PREFIX_BASE = {"b": 2, "B": 2, "o": 8, "O": 8, "x": 16, "X": 16}
_INT64 = 1 << 63
_UINT64 = 1 << 64


def _go_uint(s: str, base: int = 0) -> int | None:
    """strconv.ParseUint(s, base, 64) of a text without underscores, or None."""
    if base == 0:
        base = 10
        if s[:1] == "0":
            if len(s) >= 3 and s[1] in _PREFIX_BASE:
                base, s = _PREFIX_BASE[s[1]], s[2:]
            else:
                base, s = 8, s[1:]
                if not s:
                    return 0
    if not (s.isascii() and s.isalnum()):
        return None
    if s[:1] == "0" and _PREFIX_BASE.get(s[1:2]) == base:
        return None  # Python's int() takes the base's prefix here, Go's digits do not (0x0x1)
    try:
        value = int(s, base)
    except ValueError:
        return None
    return value if value < _UINT64 else None


def _go_int(s: str, base: int = 0) -> int | None:
    """strconv.ParseInt(s, base, 64), or None."""
    negative = s[:1] == "-"
    if s[:1] in ("-", "+"):
        s = s[1:]
    if not s:
        return None
    value = _go_uint(s, base)
    if value is None:
        return None
    if negative:
        return -value if value <= _INT64 else None
    return value if value < _INT64 else None


def _go_float(s: str) -> float | None:
    value = float(s)
    return value if math.isfinite(value) else None  # out of range: ParseFloat's error


def resolve(text: str) -> Any:
    """What go-yaml v2 reads a plain scalar as: a string, None, a bool, an int (int64 or
    uint64) or a float (a number past uint64 too, as ParseInt and ParseUint fail); a
    date stays a string. ``0x_`` has no digits, so it is the string ``"0x_"``; ``08`` is no
    octal, so it is the number 8."""
    if text in _WORDS:
        return _WORDS[text]
    first = text[:1]
    if first == ".":
        number: Any = _go_float(text.replace("_", "")) if _DOT_FLOAT.match(text) else None
        return text if number is None else number
    if first == "" or first not in _NUMBER_FIRST:
        return text
    plain = text.replace("_", "")
    number = _go_int(plain)
    if number is None:
        number = _go_uint(plain)
    if number is None and _FLOAT_SHAPE.match(plain):
        number = _go_float(plain)
    if number is None and plain.startswith("0b"):
        # go-yaml's own base-2 retry, which takes a sign after the prefix (``0b-1`` is -1).
        number = _go_int(plain[2:], 2)
        if number is None:
            number = _go_uint(plain[2:], 2)
    return text if number is None else number


_KINDS: dict[type, str] = {str: _STR, bool: _BOOL, int: _INT, float: _FLOAT, type(None): _NULL}


def _tagged(text: str, tag: str) -> Any:
    """A scalar under an explicit scalar tag, as go-yaml reads it: the tag must name what the
    text reads as (``!!float`` takes an int64 too); raises ``ValueError`` otherwise."""
    if tag == _STR:
        return text
    value = resolve(text)
    kind = _KINDS[type(value)]
    if kind == tag:
        return value
    if tag == _FLOAT and kind == _INT and value < _INT64:  # not a uint64 (go-yaml's rule)
        return float(value)
    raise ValueError(text)


def _float_key(value: float) -> str:
    """A float key as sigs.k8s.io/yaml spells it: strconv.FormatFloat(key, 'g', -1, 32), the
    shortest text of the nearest float32, an exponent from 1e+06 and below 1e-04."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    if single == 0:
        return sign + "0"
    for precision in range(1, 10):
        text = f"{abs(single):.{precision - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == abs(single):
            break
    mantissa, _, exponent_text = text.partition("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exponent = int(exponent_text)
    if exponent < -4 or exponent >= 6:
        fraction = f".{digits[1:]}" if len(digits) > 1 else ""
        return f"{sign}{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    whole = digits[: exponent + 1].ljust(exponent + 1, "0")
    rest = digits[exponent + 1 :]
    return f"{sign}{whole}.{rest}" if rest else f"{sign}{whole}"


def _key(value: Any) -> str | None:
    """A scalar key as the JSON kubectl sends spells it; None for a key it refuses (null, or
    an integer only uint64 holds: sigs.k8s.io/yaml has no spelling for either)."""
    if type(value) is str:
        return value
    if value is True:
        return "true"
    if value is False:
        return "false"
    if type(value) is int:
        return str(value) if value < _INT64 else None
    if type(value) is float:
        return _float_key(value)
    return None


#: Returned by :func:`_plain` for a scalar the slow path must read (a merge key, a number
#: JSON has no form for).
_SLOW: Any = object()


def _plain(text: str) -> Any:
    """The value of an untagged plain scalar, or :data:`_SLOW`."""
    if text == "<<":
        return _SLOW
    value = resolve(text)
    if type(value) is float and not math.isfinite(value):
        return _SLOW
    return value


class _Node:
    """A node already read, as whatever refers to it again needs it: an alias (its value, its
    expanded size, its error if it is read), a merge (a mapping's value and the error of its
    entries, a sequence's items) or a key (its tag and text)."""

    __slots__ = ("body", "dup", "err", "items", "kind", "mark", "raw", "size", "tag", "value")

    def __init__(self, value: Any, kind: str, mark: Any, tag: str | None = None) -> None:
        self.value = value
        self.kind = kind  # "scalar", "sequence" or "mapping", as PyYAML's messages name them
        self.err: Exception | None = None  # the error of reading it as a value
        self.body: Exception | None = None  # the error of merging it (a mapping's entries)
        self.dup: Exception | None = None  # a mapping's repeated key: merged or not, refused
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
    tag: str | None = event.tag
    mark = event.start_mark
    node = _Node(None, "scalar", mark, tag)
    node.raw = text
    if tag is None or tag == "!":
        if text == "<<" and event.implicit[0]:
            node.tag, node.value = _MERGE, text  # a merge as a key, the string as a value
            return node
        # Only an untagged plain scalar is resolved (``! 12`` is a string, as in go-yaml).
        node.value = resolve(text) if tag is None and event.implicit[0] else text
        node.tag = _KINDS[type(node.value)]
    elif tag == _MERGE and text == "<<":
        node.value = text
    elif tag in _SCALAR_TAGS:
        try:
            node.value = _tagged(text, tag)
        except ValueError:
            node.err = _error(f"{text!r} is not a valid {tag}", mark)
    elif tag == _MAP:
        node.err = _error("expected a mapping, found scalar", mark)
    elif tag == _SEQ:
        node.err = _error("expected a sequence node, but found scalar", mark)
    else:
        node.err = _tag_refused(tag, mark)
    if type(node.value) is float and not math.isfinite(node.value):
        # A key spells it (".inf"); as a value JSON has no number for it.
        node.err = _error(f"{text!r} has no JSON form (JSON has no infinity or NaN)", mark)
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
                            if type(r) is not str:  # a key spelled as JSON, or refused
                                key, is_map = self.place(_scalar(event), top, cur, is_map, key)
                                continue
                            key = r
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
                key, is_map = self.place(target, top, cur, is_map, key, alias=True)
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
        node.dup = info.node_err
        if info.anchor is not None:
            node.size = nodes - info.start + 1
            self.opened.pop(info.anchor, None)
            self.anchors[info.anchor] = node
        return node

    def place(
        self,
        node: _Node,
        top: list[Any],
        cur: Any,
        is_map: bool | None,
        key: Any,
        *,
        alias: bool = False,
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
            self.merge(top, node, len(cur), alias=alias)
            return _NOKEY, True
        if not is_map:
            cur.append(node.value)
            self.fail(top, node.err)
            return key, is_map
        if key is not _NOKEY:
            cur[key] = node.value
            self.fail(top, node.err)
            return _NOKEY, is_map
        if node.tag == _MERGE and node.err is None and not alias:
            # ``<<`` written as a key (``!!merge x`` is refused; an alias of ``<<`` is the key).
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
        elif node.err is not None and type(node.value) is not float:
            self.fail(top, node.err)
            return _BADKEY, is_map
        elif node.kind != "scalar":
            problem = "a mapping key must be a scalar"
            self.fail(top, _error(problem, node.mark))
            return _BADKEY, is_map
        else:
            key_text = _key(node.value)
            if key_text is None:
                problem = (
                    "a null key has no JSON form (kubectl refuses it)"
                    if node.value is None
                    else f"the key {node.value} has no JSON form (kubectl refuses an integer "
                    "key past 2**63 - 1)"
                )
                self.fail(top, _error(problem, node.mark))
                return _BADKEY, is_map
            spelled = key_text
        if spelled in cur:
            self.duplicate(top, spelled, node.mark)
        return spelled, is_map

    def merge(self, top: list[Any], node: _Node, own_before: int, *, alias: bool) -> None:
        """A merge key's value: a mapping, or a list of mappings written there (go-yaml
        refuses an alias of a list); ``own_before`` own keys of the mapping came before it."""
        info = self.info(top)
        if info.merges is None:
            info.merges = []
        mark = info.event.start_mark
        if node.kind == "mapping":
            info.merges.append((own_before, [node.value]))
            self.fail(top, _first(node.dup, node.body))
        elif node.kind == "sequence" and not alias:
            sources: list[dict[str, Any]] = []
            for item in node.items or ():
                if item.kind != "mapping":
                    problem = f"expected a mapping for merging, but found {item.kind}"
                    self.fail(top, _error(problem, item.mark, context=mark))
                    return
                sources.append(item.value)
                self.fail(top, _first(item.dup, item.body))
            info.merges.append((own_before, sources))
        else:
            found = "an alias of a sequence" if node.kind == "sequence" else node.kind
            problem = f"expected a mapping or list of mappings for merging, but found {found}"
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
