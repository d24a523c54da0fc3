"""The UPDATE freeze: what injection wrote stays as written (docs/contract/injection-notes.md §10).

The opt-in label and the two written annotations are frozen on a live Pod and on a terminating
one, since a Pod keeps serving and the kubelet keeps reprojecting the client file through its
grace period. Every other edit is allowed, finalizers included. All violations are reported
together as one ``Invalid`` verdict (HTTP 422) with a cause per key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_render.core import errors, jsonview
from gpustack_render.core import labels as keys
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import METADATA
from gpustack_render.engines.connectors import CLIENT_CONFIG_PATH
from gpustack_render.injection import refusal as r
from gpustack_render.injection.contract import (
    ANNOTATION_INJECTED,
    INJECT_TRUE,
    WRITTEN_KEYS,
)

_ABSENT = object()

_WHY = {
    ANNOTATION_INJECTED: "an edited injection record would record a decision nobody made",
    keys.KV_CLIENT_CONFIG: (
        f"it is projected at {CLIENT_CONFIG_PATH}, so an edit would swap the master address, "
        "transport and sizes under a running container"
    ),
}


def freeze_pod(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> ErrorList:
    """The freeze violations of an UPDATE from ``old`` to ``new`` (empty = allowed)."""
    old_pod: Mapping[str, Any] = old or {}
    new_pod: Mapping[str, Any] = new or {}
    was = jsonview.labels_of(old_pod).get(keys.KV_INJECT) == INJECT_TRUE
    now = jsonview.labels_of(new_pod).get(keys.KV_INJECT) == INJECT_TRUE
    errs = ErrorList()
    if not was and not now:
        return errs
    label_path = METADATA.child("labels").key(keys.KV_INJECT)
    if now and not was:
        errs.append(
            errors.forbidden(
                label_path,
                "the label is immutable: injection runs only at CREATE, so this Pod would claim a "
                "KV cache it has no configuration for; set it where the Pod is defined and "
                "replace the Pod",
                origin=r.LABEL_ADDED,
            )
        )
    elif was and not now:
        errs.append(
            errors.forbidden(
                label_path,
                "the label is immutable: nothing un-injects a Pod and the written configuration "
                "stays; change it where the Pod is defined",
                origin=r.LABEL_REMOVED,
            )
        )
    old_notes = jsonview.annotations_of(old_pod)
    new_notes = jsonview.annotations_of(new_pod)
    for key in WRITTEN_KEYS:
        before = old_notes.get(key, _ABSENT)
        after = new_notes.get(key, _ABSENT)
        if before == after:
            continue
        change = "added" if before is _ABSENT else "removed" if after is _ABSENT else "changed"
        errs.append(
            errors.forbidden(
                METADATA.child("annotations").key(key),
                f"{change}: the annotation is written by the KV-cache injection webhook and "
                f"frozen; {_WHY[key]}; change the inputs and replace the Pod",
                origin=r.WRITTEN_ANNOTATION,
            )
        )
    return errs
