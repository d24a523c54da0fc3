"""Choosing the container to inject into (step 16; ``inject.no-containers``,
``inject.container-unnamed``, ``inject.init-container`` and ``inject.container-not-found``, the
refusals of docs/contract/injection-notes.md §6).

The first container is never chosen for the author: with several containers the container
annotation must name the engine's, and it must name an app container, since an init container
finishes before the workload starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview
from gpustack_render.injection import refusal as r
from gpustack_render.injection.contract import ANNOTATION_CONTAINER
from gpustack_render.injection.refusal import Refusal


@dataclass(frozen=True, slots=True)
class Target:
    """The chosen app container: its index in ``spec.containers`` and its name."""

    index: int
    name: str
    container: dict[str, Any]


def select_container(pod_spec: Mapping[str, Any], *, named: str) -> Target | Refusal:
    """The target app container; ``named`` is the container annotation (``""`` = unset)."""
    containers = jsonview.items(pod_spec.get("containers"))
    names = [jsonview.name_of(c) for c in containers]
    if not containers:
        return Refusal(r.NO_CONTAINERS, "the Pod has no containers: nothing to inject into")
    listed = ", ".join(names)
    if not named:
        if len(containers) > 1:
            return Refusal(
                r.CONTAINER_UNNAMED,
                f"the Pod has {len(containers)} containers ({listed}) and annotation "
                f"{ANNOTATION_CONTAINER} names none: set it to the engine's container; the "
                "first is never chosen",
            )
        return Target(0, names[0], jsonview.mapping(containers[0]))
    if named in names:
        index = names.index(named)
        return Target(index, named, jsonview.mapping(containers[index]))
    init_names = [jsonview.name_of(c) for c in jsonview.items(pod_spec.get("initContainers"))]
    if named in init_names:
        return Refusal(
            r.INIT_CONTAINER,
            f"annotation {ANNOTATION_CONTAINER} names {named!r}, an init container: it finishes "
            f"before the workload starts, so configuring it caches nothing; name an app "
            f"container ({listed})",
        )
    return Refusal(
        r.CONTAINER_NOT_FOUND,
        f"annotation {ANNOTATION_CONTAINER} names {named!r}, which is not a container of this "
        f"Pod; app containers: {listed}",
    )
