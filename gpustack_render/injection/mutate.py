"""Applying a rendered store client to a copy of the Pod (step 20, kv-injection.md §5).

Nothing else changes: no label, resource, image, command, scheduling field, owner reference or
other container. The input is never modified: the Pod is deep-copied first, and the caller
derives the JSON Patch from (input, copy).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from gpustack_render import connectors
from gpustack_render.connectors import StoreClient
from gpustack_render.injection import podview
from gpustack_render.injection.contract import ANNOTATION_INJECTED
from gpustack_render.injection.record import InjectionRecord


def write_env(env: list[Any], entries: list[dict[str, Any]]) -> None:
    """Rendered env, in order, written in place: every entry of that name is replaced whole
    (value and ``valueFrom``) where it stands; a name not present is appended."""
    for entry in entries:
        name = entry["name"]
        positions = [i for i, e in enumerate(env) if podview.name_of(e) == name]
        for i in positions:
            env[i] = copy.deepcopy(entry)
        if not positions:
            env.append(copy.deepcopy(entry))


def default_env(env: list[Any], entries: list[dict[str, Any]]) -> None:
    """Defaulted env: each entry appended only when no entry of that name exists."""
    present = {podview.name_of(e) for e in env}
    for entry in entries:
        if entry["name"] not in present:
            env.append(copy.deepcopy(entry))


def apply_injection(
    pod: Mapping[str, Any],
    *,
    index: int,
    client: StoreClient,
    defaulted_args: list[str],
    record: InjectionRecord,
) -> dict[str, Any]:
    """A copy of ``pod`` with ``client`` applied to container ``index`` (§5 steps 1–5).

    ``defaulted_args`` are the defaulted groups that survived (the user did not name them).
    """
    out: dict[str, Any] = copy.deepcopy(dict(pod))
    spec = out["spec"]
    container = spec["containers"][index]

    env = container.get("env")
    env = env if isinstance(env, list) else []
    write_env(env, client.env)
    default_env(env, connectors.observability_env())
    container["env"] = env

    args = container.get("args")
    container["args"] = [*(args if isinstance(args, list) else []), *client.args, *defaulted_args]

    if client.mounts:
        mounts = container.get("volumeMounts")
        container["volumeMounts"] = [
            *(mounts if isinstance(mounts, list) else []),
            *copy.deepcopy(client.mounts),
        ]
    if client.volumes:
        volumes = spec.get("volumes")
        spec["volumes"] = [
            *(volumes if isinstance(volumes, list) else []),
            *copy.deepcopy(client.volumes),
        ]

    metadata = out.get("metadata")
    if not isinstance(metadata, dict):
        metadata = out["metadata"] = {}
    annotations = metadata.get("annotations")
    if not isinstance(annotations, dict):
        annotations = metadata["annotations"] = {}
    annotations.update(client.annotations)
    annotations[ANNOTATION_INJECTED] = record.to_json()
    return out
