"""What a create or an edit does to the router's objects (D26; docs/explain.md, "The router").

The router's objects are compared manifest by manifest, old rendering against new: each one is
created, deleted, or changed — and the router Deployment is told apart as scaled (only
``replicas`` moved) or rolled (its Pod template moved, so its Pods are replaced). None of it
touches an engine Pod: only the router's presence and ``router.name`` are pod-spec-hash inputs
(D10), and those move the roles' actions, which the role table shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_render.explain.model import RouterChange, RouterExplanation
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.rendering.router import RouterRendering


def _by_key(router: RouterRendering | None) -> dict[tuple[str, str], Mapping[str, Any]]:
    if router is None:
        return {}
    return {(str(o["kind"]), str(o["metadata"]["name"])): o for o in router.objects}


def _without_replicas(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {**obj, "spec": {**dict(obj.get("spec") or {}), "replicas": None}}


def _change(kind: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """How a stored object changes: ``None`` when it does not."""
    if old == new:
        return None
    if kind == "Deployment":
        if _without_replicas(old) == _without_replicas(new):
            before, after = (dict(o.get("spec") or {}).get("replicas") for o in (old, new))
            return f"scaled {before} -> {after}"
        if dict(old.get("spec") or {}).get("template") != dict(new.get("spec") or {}).get(
            "template"
        ):
            return "updated; its Pods roll"
    return "updated"


def explain_router(old: Rendering | None, new: Rendering) -> RouterExplanation | None:
    """The router part of an explanation (``old``: the stored object's rendering, ``None`` on
    create); ``None`` when neither side declares a router."""
    before = old.router if old is not None else None
    after = new.router
    if before is None and after is None:
        return None
    name = after.router if after is not None else before.router if before is not None else ""
    failure = after.failure.message if after is not None and after.failure is not None else ""
    old_objects, new_objects = _by_key(before), _by_key(after)
    changes: list[RouterChange] = []
    for (kind, obj_name), manifest in new_objects.items():
        previous = old_objects.get((kind, obj_name))
        if previous is None:
            changes.append(RouterChange(kind, obj_name, "created"))
            continue
        what = _change(kind, previous, manifest)
        if what is not None:
            changes.append(RouterChange(kind, obj_name, what))
    for kind, obj_name in old_objects:
        if (kind, obj_name) not in new_objects:
            changes.append(RouterChange(kind, obj_name, "deleted"))
    return RouterExplanation(
        name=name, removed=after is None, changes=tuple(changes), failure=failure
    )
