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
real submitted one (docs/contract/kv-injection.md §5: the patch *is* the mutation). That check runs
on the small pruned trees; a failure falls back to the plain diff, verified on the whole Pods, and
as a last resort to a coarse patch that never diffs inside an array. A changed array too long to
diff in time (a hostile Pod's) gets the coarse patch directly. Markers and placeholders start with
NUL, which no real Pod key or string carries in practice.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


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


def _applies(original: Any, ops: list[dict[str, Any]], mutated: Any) -> bool:
    try:
        return bool(jsonpatch.apply_patch(_fresh(original), ops, in_place=True) == mutated)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException):
        return False


def make_patch(original: Any, mutated: Any) -> list[dict[str, Any]]:
    """The JSON Patch turning ``original`` into ``mutated`` (``jsonpatch.make_patch``), computed
    over the branches the two do not share, and verified to give ``mutated``."""
    src, dst, _ = _prune(original, mutated)
    coarse: list[dict[str, Any]] = []
    if _wide(src, dst):
        _coarse(original, mutated, [], coarse, by_position=True)
        return coarse
    ops: list[dict[str, Any]] = jsonpatch.make_patch(src, dst).patch
    if not any(_touches_pruned(op) for op in ops) and _applies(src, ops, dst):
        return ops
    ops = jsonpatch.make_patch(original, mutated).patch
    if _applies(original, ops, mutated):
        return ops
    _coarse(original, mutated, [], coarse)
    return coarse
