"""Bounded JSON nesting: one hostile object must never stop a list, a watch or a review.

The API server stores objects nested far deeper than Python's parser and the models can walk
(an unknown field kept under a ``x-kubernetes-preserve-unknown-fields`` subtree). Every JSON
text the shells read goes through :func:`loads`, and every object goes through
:func:`too_deep` before a model sees it (:mod:`gpustack_render.schema.decoding` does it for every
decode), so such an object is reported as one unreadable object, never as a ``RecursionError``
that takes a whole list with it.

:func:`loads` is :func:`json.loads` when the parser copes. When it does not (nesting past the
interpreter's recursion limit), the text is parsed again with every value nested deeper than
:data:`MAX_DEPTH` replaced by a :class:`TooDeep` marker, so the other items of a list decode as
usual and the marked one fails :func:`too_deep` with the path of the cut.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Final

from gpustack_render.core.paths import FieldPath

#: Deepest nesting (objects and arrays) an object may have. Kubernetes objects written by
#: people stay below 30 (a Pod's affinity terms are about 12 deep); 100 leaves room for any
#: preserved unknown subtree a tool could reasonably write and stays far from the parser's
#: recursion limit (about 1,000).
MAX_DEPTH: Final = 100

#: What the second parse writes in place of a cut subtree (a string no API object carries).
_CUT: Final = "\x00gpustack-render: nested too deep\x00"

# A JSON string (escapes included) or one structural bracket; everything else is skipped.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


class TooDeep(str):
    """A value the parser did not build because it was nested deeper than :data:`MAX_DEPTH`."""

    __slots__ = ()


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of ``text``; raises ``ValueError`` for text that is not JSON, never
    ``RecursionError``. Values nested deeper than ``max_depth`` may come back as
    :class:`TooDeep` (only when the plain parse could not cope); what a cut subtree held is
    not parsed at all, so the value is unreadable whatever it was."""
    try:
        return json.loads(text)
    except RecursionError:
        pass
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _mark(json.loads(_cut(text, max_depth)))


def _cut(text: str, max_depth: int) -> str:
    """``text`` with each array or object opened below ``max_depth`` replaced by ``_CUT``."""
    pieces: list[str] = []
    depth = 0
    start = -1
    last = 0
    for match in _TOKEN.finditer(text):
        char = text[match.start()]
        if char == '"':
            continue
        if char in "[{":
            depth += 1
            if depth == max_depth + 1:
                start = match.start()
            continue
        if depth == max_depth + 1 and start >= 0:
            pieces.append(text[last:start])
            pieces.append(json.dumps(_CUT))
            last = match.end()
            start = -1
        depth -= 1
    pieces.append(text[last:])
    return "".join(pieces)


def _children(node: Any) -> Iterable[tuple[Any, Any]]:
    """(key or index, member) of an object or array; nothing for a scalar."""
    if isinstance(node, dict):
        return node.items()
    if isinstance(node, list):
        return enumerate(node)
    return ()


def _mark(value: Any) -> Any:
    """Replace each ``_CUT`` string of a freshly parsed value by a :class:`TooDeep` (no
    recursion: the value is at most ``max_depth`` deep, but walk it iteratively anyway)."""
    if value == _CUT:
        return TooDeep(_CUT)
    stack = [value]
    while stack:
        node = stack.pop()
        for key, child in list(_children(node)):
            if child == _CUT:
                node[key] = TooDeep(_CUT)
            elif isinstance(child, (dict, list)):
                stack.append(child)
    return value


def within(data: Any, max_depth: int = MAX_DEPTH) -> bool:
    """Whether nothing in ``data`` is nested deeper than ``max_depth`` levels of objects and
    lists, or cut by :func:`loads`: the walk of :func:`too_deep` without the paths it keeps to
    name the culprit (every review walks a whole Pod; only a refused one needs the path).
    Iterative, and it stops at the first level past the bound."""
    stack: list[tuple[Any, int]] = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        elif isinstance(node, TooDeep):
            return False
        else:
            continue
        if depth >= max_depth:
            return False
        for child in children:
            if isinstance(child, (dict, list, TooDeep)):
                stack.append((child, depth + 1))
    return True


def too_deep(data: Any, *, max_depth: int = MAX_DEPTH) -> FieldPath | None:
    """The path of the first value nested deeper than ``max_depth`` (or cut by :func:`loads`),
    ``None`` when there is none. Iterative: any depth is walked without recursion."""
    if within(data, max_depth):
        return None
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(data, 0, ())]
    while stack:
        node, depth, parts = stack.pop()
        if isinstance(node, TooDeep):
            return FieldPath(parts)
        if not isinstance(node, (dict, list)):
            continue
        if depth >= max_depth:
            return FieldPath(parts)
        for key, child in _children(node):
            if isinstance(child, (dict, list, TooDeep)):
                stack.append((child, depth + 1, (*parts, key)))
    return None
