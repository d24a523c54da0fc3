"""The JSON Patch of an admitted Pod: ``jsonpatch.make_patch(original, mutated)``, made fast.

The mutated Pod is built copy-on-write (:mod:`gpustack_render.injection.mutate`), so every
branch injection leaves alone is the *same object* in both documents. Before diffing, those
shared branches are pruned from both sides: a shared object member is dropped from both
objects, and a shared array item that is an object or array is replaced in both arrays by the
same placeholder string, unique to its position (scalars stay: they compare cheaply).

Dropping a member from both sides changes no operation on the other members. A placeholder
stands for an item identical on both sides, so whatever the diff decides about it (keep it, or
move it) is right for the real documents too. The one thing that would not be is an operation
*writing* a placeholder; this module checks for it and then answers with the plain, unpruned
``make_patch``. Placeholders start with NUL, which no real Pod string collides with in
practice. The golden cases and the property tests check that the patch applied to the
submitted Pod gives exactly the injected one.
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


def make_patch(original: Any, mutated: Any) -> list[dict[str, Any]]:
    """The JSON Patch turning ``original`` into ``mutated`` (``jsonpatch.make_patch``), computed
    over the branches the two do not share."""
    src, dst = _prune(original, mutated)
    ops: list[dict[str, Any]] = jsonpatch.make_patch(src, dst).patch
    if any(_writes_placeholder(op.get("value")) for op in ops):
        ops = jsonpatch.make_patch(original, mutated).patch
    return ops
