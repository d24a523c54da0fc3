"""The JSON Patch of an admitted Pod: ``jsonpatch.make_patch(original, mutated)``, made fast.

The mutated Pod is built copy-on-write (:mod:`gpustack_render.injection.mutate`), so every
branch injection leaves alone is the *same object* in both documents. Before diffing, those
shared branches are pruned from both sides: a shared object member is dropped from both
objects, and a shared array item that is an object or array is replaced in both arrays by the
same placeholder string, unique to its position (scalars stay: they compare cheaply).

Dropping a member from both sides changes no operation on the other members of that object.
It can change how ``jsonpatch`` pairs the items of an array, though: two array items pruned
against different partners may compare equal when the real items do not (an ``env`` entry
rewritten in place beside one declared without a value), and an operation may then write a
pruned item. So the pruned patch is only a candidate: it is applied to the submitted Pod and
kept when it gives exactly the injected one (kv-injection.md §5: the patch *is* the
mutation); otherwise the plain ``make_patch`` is used, verified the same way, and as a last
resort a coarse patch that never diffs inside an array. Placeholders start with NUL, which no
real Pod string collides with in practice.
"""

from __future__ import annotations

from typing import Any, Final

import jsonpatch

#: The prefix of a placeholder: a string no Kubernetes object carries (it starts with NUL).
_SHARED: Final = "\x00gpustack-render/shared/"


def _prune(src: Any, dst: Any) -> tuple[Any, Any]:
    if isinstance(src, dict) and isinstance(dst, dict):
        s: dict[Any, Any] = {}
        d: dict[Any, Any] = {}
        for key, value in src.items():
            if key in dst and dst[key] is value:
                continue
            if key in dst:
                s[key], d[key] = _prune(value, dst[key])
            else:
                s[key] = value
        for key, value in dst.items():
            if key not in src:
                d[key] = value
        return s, d
    if isinstance(src, list) and isinstance(dst, list):
        sl = list(src)
        dl = list(dst)
        for j in range(min(len(sl), len(dl))):
            if sl[j] is dl[j]:
                if isinstance(sl[j], dict | list):
                    sl[j] = dl[j] = f"{_SHARED}{j}"
            else:
                sl[j], dl[j] = _prune(sl[j], dl[j])
        return sl, dl
    return src, dst


def _writes_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith(_SHARED)
    if isinstance(value, dict):
        return any(_writes_placeholder(v) for v in value.values())
    if isinstance(value, list):
        return any(_writes_placeholder(v) for v in value)
    return False


def _pointer(parts: list[str]) -> str:
    return "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


def _coarse(src: Any, dst: Any, parts: list[str], ops: list[dict[str, Any]]) -> None:
    """Object members added, removed or recursed into; anything else replaced whole."""
    if src == dst:
        return
    if not (isinstance(src, dict) and isinstance(dst, dict)):
        ops.append({"op": "replace", "path": _pointer(parts), "value": dst})
        return
    for key in src:
        if key not in dst:
            ops.append({"op": "remove", "path": _pointer([*parts, str(key)])})
    for key, value in dst.items():
        if key in src:
            _coarse(src[key], value, [*parts, str(key)], ops)
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
    src, dst = _prune(original, mutated)
    ops: list[dict[str, Any]] = jsonpatch.make_patch(src, dst).patch
    if not any(_writes_placeholder(op.get("value")) for op in ops) and _applies(
        original, ops, mutated
    ):
        return ops
    ops = jsonpatch.make_patch(original, mutated).patch
    if _applies(original, ops, mutated):
        return ops
    coarse: list[dict[str, Any]] = []
    _coarse(original, mutated, [], coarse)
    return coarse
