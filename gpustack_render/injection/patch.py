"""The JSON Patch of an admitted Pod: ``jsonpatch.make_patch(original, mutated)``, made fast.

The mutated Pod is built copy-on-write (:mod:`gpustack_render.injection.mutate`), so every
branch injection leaves alone is the *same object* in both documents. Before diffing, those
shared branches are pruned from both sides: a shared object member is dropped from both
objects, and a shared array item that is an object or array is replaced in both arrays by the
same placeholder string, unique to its path. Every object that lost a member this way (itself
or below it) carries a marker member naming its path, on both sides; an object that lost nothing
stays the real object.

Markers keep the diff honest: two pruned objects compare equal only when they stand at the same
path and their real contents are equal, so ``jsonpatch`` never pairs an ``env`` entry rewritten in
place with a different one that merely looks alike once pruned. An operation that would *write* a
marker or a placeholder, or names a marker member in its path, would write a pruned object, not the
real one: then the plain ``make_patch`` is used instead. Otherwise every written value is a real,
unpruned branch of the mutated Pod and every path exists in both, so the patch applied to the
pruned submitted Pod giving the pruned mutated one means it gives the real mutated Pod from the
real submitted one (docs/contract/injection-notes.md §5: the patch *is* the mutation). That check
runs on the small pruned trees, with this module's own RFC 6902 applier (``jsonpatch``'s copies and
validates every operation, and cost more than the diff it checked); a failure falls back to the
plain diff, verified on the whole Pods, and as a last resort to a coarse patch that never diffs
inside an array. A changed array too long to diff in time (a hostile Pod's) gets the coarse patch
directly. Markers and placeholders start with NUL, which no real Pod key or string carries in
practice.

The diff of the pruned trees is ``jsonpatch``'s, computed the cheapest way that gives its
operations: when the mutated side only adds to the submitted one (members, appended items,
items grown in place: injection's usual work), the additions are written directly in the order
``jsonpatch`` writes them (:func:`_additions`); otherwise ``jsonpatch``'s ``DiffBuilder`` runs
without the ``JsonPatch`` object around it (:func:`_builder_diff`). Property tests check both
against ``jsonpatch.make_patch`` (tests/unit/test_injection_patch.py), so the patch, and every
golden file that pins one, is the one the plain diff of the pruned trees writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import jsonpatch

#: The prefix of a placeholder: a string no Kubernetes object carries (it starts with NUL).
_SHARED: Final = "\x00gpustack-render/shared/"


#: The key of the marker member every pruned object carries (it starts with NUL).
_MARK: Final = "\x00gpustack-render/pruned"


def _prune(src: Any, dst: Any, path: str = "") -> tuple[Any, Any, bool]:
    """(pruned src, pruned dst, whether anything was pruned)."""
    if isinstance(src, dict) and isinstance(dst, dict):
        s: dict[Any, Any] = {}
        d: dict[Any, Any] = {}
        pruned = False
        for key, value in src.items():
            if key in dst and dst[key] is value:
                pruned = True
                continue
            if key in dst:
                s[key], d[key], inner = _prune(value, dst[key], f"{path}/{key}")
                pruned = pruned or inner
            else:
                s[key] = value
        if not pruned:
            return src, dst, False
        for key, value in dst.items():
            if key not in src:
                d[key] = value
        s[_MARK] = d[_MARK] = path
        return s, d, True
    if isinstance(src, list) and isinstance(dst, list):
        sl = list(src)
        dl = list(dst)
        pruned = False
        for j in range(min(len(sl), len(dl))):
            if sl[j] is dl[j]:
                if isinstance(sl[j], dict | list):
                    sl[j] = dl[j] = f"{_SHARED}{path}/{j}"
                    pruned = True
            else:
                sl[j], dl[j], inner = _prune(sl[j], dl[j], f"{path}/{j}")
                pruned = pruned or inner
        return (sl, dl, True) if pruned else (src, dst, False)
    return src, dst, False


#: A changed array with more items than this that the two sides do not share is replaced whole
#: (the coarse patch) instead of being diffed item by item: ``jsonpatch`` matches array items
#: with ``difflib``, quadratic on the many equal entries a hostile Pod can send (17,000
#: alternating ``env`` entries took 11 s, past the API server's 10 s timeout). No real Pod
#: comes near it.
_DIFF_ITEMS: Final = 1000


def _wide(src: Any, dst: Any) -> bool:
    """Whether the pruned trees hold a changed array with more than :data:`_DIFF_ITEMS`
    unshared items on either side."""
    if isinstance(src, dict) and isinstance(dst, dict):
        return any(_wide(v, dst[k]) for k, v in src.items() if k in dst and v is not dst[k])
    if isinstance(src, list) and isinstance(dst, list) and src is not dst:
        for side in (src, dst):
            if sum(1 for v in side if not _is_placeholder(v)) > _DIFF_ITEMS:
                return True
        return any(_wide(a, b) for a, b in zip(src, dst, strict=False) if a is not b)
    return False


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(_SHARED)


def _writes_placeholder(value: Any) -> bool:
    """True when ``value`` holds a placeholder or a marker: it is a pruned branch."""
    if isinstance(value, str):
        return value.startswith(_SHARED)
    if isinstance(value, dict):
        return _MARK in value or any(_writes_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_writes_placeholder(v) for v in value)
    return False


def _touches_pruned(op: Mapping[str, Any]) -> bool:
    """True when ``op`` writes a pruned branch or names a marker member in its path: applied to
    the real Pod it would write a placeholder or a marker (or miss its target)."""
    return (
        _writes_placeholder(op.get("value"))
        or "\x00" in str(op.get("path", ""))
        or "\x00" in str(op.get("from", ""))
    )


def _pointer(parts: list[str]) -> str:
    return "".join("/" + _escape(p) for p in parts)


def _coarse(
    src: Any, dst: Any, parts: list[str], ops: list[dict[str, Any]], *, by_position: bool = False
) -> None:
    """Object members added, removed or recursed into; anything else replaced whole. With
    ``by_position``, two arrays of one length up to :data:`_DIFF_ITEMS` are recursed into item
    by item as well (the target container, not the whole container list, is written)."""
    if src == dst:
        return
    if (
        by_position
        and isinstance(src, list)
        and isinstance(dst, list)
        and len(src) == len(dst) <= _DIFF_ITEMS
    ):
        for j, (a, b) in enumerate(zip(src, dst, strict=True)):
            _coarse(a, b, [*parts, str(j)], ops, by_position=True)
        return
    if not (isinstance(src, dict) and isinstance(dst, dict)):
        ops.append({"op": "replace", "path": _pointer(parts), "value": dst})
        return
    for key in src:
        if key not in dst:
            ops.append({"op": "remove", "path": _pointer([*parts, str(key)])})
    for key, value in dst.items():
        if key in src:
            _coarse(src[key], value, [*parts, str(key)], ops, by_position=by_position)
        else:
            ops.append({"op": "add", "path": _pointer([*parts, str(key)]), "value": value})


def _fresh(value: Any) -> Any:
    """A copy with no object shared twice, as the API server holds the decoded Pod."""
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    return value


class _NotApplicable(Exception):  # noqa: N818 (internal: the patch does not apply)
    """An operation of the patch does not apply to the document (RFC 6902 §5: an error)."""


def _parts(pointer: Any) -> list[str]:
    """The reference tokens of a JSON Pointer (RFC 6901)."""
    if not isinstance(pointer, str) or (pointer and not pointer.startswith("/")):
        raise _NotApplicable(pointer)
    if not pointer:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in pointer[1:].split("/")]


def _index(token: str, length: int, *, end_ok: bool) -> int:
    """A list index token: decimal without leading zeros, within the list (``end_ok``: up to
    its length, and ``-`` for the end)."""
    if token == "-" and end_ok:
        return length
    if not token.isdigit() or not token.isascii() or (token != "0" and token.startswith("0")):
        raise _NotApplicable(token)
    index = int(token)
    if index > length or (index == length and not end_ok):
        raise _NotApplicable(token)
    return index


def _walk(doc: Any, parts: list[str]) -> Any:
    for token in parts:
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list):
            doc = doc[_index(token, len(doc), end_ok=False)]
        else:
            raise _NotApplicable(token)
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _walk(doc, parts[:-1])
    if isinstance(parent, dict):
        parent[parts[-1]] = value
    elif isinstance(parent, list):
        parent.insert(_index(parts[-1], len(parent), end_ok=True), value)
    else:
        raise _NotApplicable(parts[-1])
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    """Remove the value at ``parts`` (which must exist) and return it."""
    if not parts:
        raise _NotApplicable("")
    parent = _walk(doc, parts[:-1])
    if isinstance(parent, dict) and parts[-1] in parent:
        return parent.pop(parts[-1])
    if isinstance(parent, list):
        return parent.pop(_index(parts[-1], len(parent), end_ok=False))
    raise _NotApplicable(parts[-1])


def _apply(doc: Any, ops: list[dict[str, Any]]) -> Any:
    """``doc`` with the JSON Patch ``ops`` applied in place (RFC 6902), every written value a
    fresh copy; raises :class:`_NotApplicable` where an operation does not apply. The patch's
    own check, kept small so it costs a fraction of the diff it checks."""
    for op in ops:
        kind = op.get("op")
        path = _parts(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise _NotApplicable(kind)
        if kind == "add":
            doc = _add(doc, path, _fresh(op["value"]))
        elif kind == "remove":
            _remove(doc, path)
        elif kind == "replace":
            if path:
                _walk(doc, path)  # must exist
                parent = _walk(doc, path[:-1])
                if isinstance(parent, list):
                    parent[_index(path[-1], len(parent), end_ok=False)] = _fresh(op["value"])
                else:
                    parent[path[-1]] = _fresh(op["value"])
            else:
                doc = _fresh(op["value"])
        elif kind in ("move", "copy"):
            source = _parts(op.get("from"))
            if kind == "move":
                if path[: len(source)] == source and path != source:
                    raise _NotApplicable("move into itself")
                value = _remove(doc, source)
            else:
                value = _fresh(_walk(doc, source))
            doc = _add(doc, path, value)
        elif kind == "test":
            if not _same_json(_walk(doc, path), op["value"]):
                raise _NotApplicable("test")
        else:
            raise _NotApplicable(kind)
    return doc


def _applies(original: Any, ops: list[dict[str, Any]], mutated: Any) -> bool:
    """Whether ``ops`` turn (a fresh copy of) ``original`` into ``mutated``. Compared with
    ``==`` (``1 == True``): the diffs themselves tell ``1`` from ``true`` (by type, or by
    serialising), and every value the patch writes is the mutated Pod's own."""
    try:
        return bool(_apply(_fresh(original), ops) == mutated)
    except (_NotApplicable, IndexError, KeyError, TypeError):
        return False


class _NotAdditive(Exception):  # noqa: N818 (internal: take the general diff)
    """The two documents differ in more than added members and appended items."""


def _same_json(a: Any, b: Any) -> bool:
    """Equal, and of the same JSON types all the way down (what ``jsonpatch`` compares by
    serialising; ``1`` and ``1.0`` count as different here, which only sends a rare Pod to the
    general diff)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same_json(v, b[k]) for k, v in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _add_ops(src: Any, dst: Any, path: str, ops: list[dict[str, Any]]) -> None:
    """The operations ``jsonpatch`` writes for ``dst`` when it only adds to ``src``, in its
    order: per object, added members in ``dst``'s order, then the shared members in ``src``'s;
    per array, the items appended past ``src``'s, by index. Raises :class:`_NotAdditive` for
    anything else (a member removed, a value changed, an array item changed or inserted)."""
    if isinstance(src, dict) and isinstance(dst, dict):
        if any(not isinstance(k, str) for k in dst) or any(k not in dst for k in src):
            raise _NotAdditive
        for key, value in dst.items():
            if key not in src:
                ops.append({"op": "add", "path": f"{path}/{_escape(key)}", "value": value})
        for key, value in src.items():
            if value is not dst[key]:
                _add_ops(value, dst[key], f"{path}/{_escape(key)}", ops)
        return
    if isinstance(src, list) and isinstance(dst, list):
        _add_list_ops(src, dst, path, ops)
        return
    if not _same_json(src, dst):
        raise _NotAdditive


#: Longest changed stretch of an array :func:`_add_list_ops` pairs up itself (it compares every
#: item of one side with every item of the other); a longer one takes the general diff.
_PAIRED_ITEMS: Final = 64


def _add_list_ops(src: list[Any], dst: list[Any], path: str, ops: list[dict[str, Any]]) -> None:
    """The operations ``jsonpatch`` writes for an array that keeps ``src``'s items in place,
    changes some of them by additions only, and appends items.

    ``jsonpatch`` sets aside the common start and end, matches up equal items in between
    (``difflib``) and pairs what is left by position. When nothing in between equals an item of
    the other side at another position, the matching pairs every item with the one at its own
    index, so the patch is: each changed item's additions, in order, then the appended items.
    Anything else (a shorter ``dst``, an item equal to one elsewhere, a common end that would
    shift the pairing) raises :class:`_NotAdditive`."""
    if len(dst) < len(src):
        raise _NotAdditive
    start = 0
    while start < len(src) and _same_json(src[start], dst[start]):
        start += 1
    if start < len(src):
        if len(dst) - start > _PAIRED_ITEMS:
            raise _NotAdditive
        if len(dst) > len(src) and _same_json(src[-1], dst[-1]):
            raise _NotAdditive  # a common end: jsonpatch would pair the items off position
        for i in range(start, len(src)):
            for j in range(start, len(dst)):
                if i != j and _same_json(src[i], dst[j]):
                    raise _NotAdditive
        for i in range(start, len(src)):
            a, b = src[i], dst[i]
            if _same_json(a, b):
                continue
            if not (
                (isinstance(a, dict) and isinstance(b, dict))
                or (isinstance(a, list) and isinstance(b, list))
            ):
                raise _NotAdditive
            _add_ops(a, b, f"{path}/{i}", ops)
    for index in range(len(src), len(dst)):
        ops.append({"op": "add", "path": f"{path}/{index}", "value": dst[index]})


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _additions(src: Any, dst: Any) -> list[dict[str, Any]] | None:
    """``jsonpatch.make_patch(src, dst).patch`` when ``dst`` only adds to ``src`` (members and
    appended array items: what injection does unless it rewrites an ``env`` entry in place or
    removes one), else None. With nothing removed there is nothing for ``jsonpatch`` to turn
    into a move, so its patch is these additions in its traversal order."""
    ops: list[dict[str, Any]] = []
    try:
        _add_ops(src, dst, "", ops)
    except _NotAdditive:
        return None
    return ops


def _public_diff(src: Any, dst: Any) -> list[dict[str, Any]]:
    patch: list[dict[str, Any]] = jsonpatch.make_patch(src, dst).patch
    return patch


def _builder_diff(src: Any, dst: Any) -> list[dict[str, Any]]:
    """``jsonpatch.make_patch(src, dst).patch`` from jsonpatch's own ``DiffBuilder``, without the
    ``JsonPatch`` built around its operations (which copies every written value and validates
    every operation by building its pointers: a third of the diff's time). The values share
    ``dst``'s branches, as the mutated Pod shares the submitted one's."""
    builder = jsonpatch.DiffBuilder(src, dst)
    builder._compare_values((), None, src, dst)  # type: ignore[attr-defined]
    return list(builder.execute())


def _diff_through_builder_agrees() -> bool:
    """Whether this jsonpatch's ``DiffBuilder`` is driven as :func:`_builder_diff` expects
    (its diff entry point is not public; another release may shape it differently): a diff of
    every operation kind, compared with ``jsonpatch.make_patch``'s."""
    src = {"a": [1, 2, 3], "b": {"c": "d", "e": 1}, "x~/y": [{"k": 1}], "m": "v"}
    dst = {"a": [1, 3, 4, 5], "b": {"c": "dd", "f": [True]}, "x~/y": [{"k": 2}], "n": "v"}
    try:
        return _builder_diff(src, dst) == _public_diff(src, dst)
    except Exception:  # any failure means: use the public entry point
        return False


#: The diff :func:`make_patch` runs: the builder's when it agrees with the public API on this
#: jsonpatch, else the public ``jsonpatch.make_patch``.
_diff: Callable[[Any, Any], list[dict[str, Any]]] = (
    _builder_diff if _diff_through_builder_agrees() else _public_diff
)


def make_patch(original: Any, mutated: Any) -> list[dict[str, Any]]:
    """The JSON Patch turning ``original`` into ``mutated`` (``jsonpatch.make_patch``), computed
    over the branches the two do not share, and verified to give ``mutated``."""
    src, dst, _ = _prune(original, mutated)
    coarse: list[dict[str, Any]] = []
    if _wide(src, dst):
        _coarse(original, mutated, [], coarse, by_position=True)
        return coarse
    added = _additions(src, dst)
    ops = added if added is not None else _diff(src, dst)
    if not any(_touches_pruned(op) for op in ops) and _applies(src, ops, dst):
        return ops
    ops = _public_diff(original, mutated)
    if _applies(original, ops, mutated):
        return ops
    _coarse(original, mutated, [], coarse)
    return coarse
