"""Applying a rendered store client to a copy of the Pod (step 20,
docs/contract/injection-notes.md §5).

Nothing else changes: no label, resource, image, command, scheduling field, owner reference or
other container. The input is never modified. The copy is made copy-on-write: every object on
a path injection changes (the Pod, its metadata and annotations, the spec, the container list,
the target container and its env, args and mounts lists, the volumes list) is a new object,
every rendered value is fresh, and every other branch is shared with the input, which neither
side modifies. :mod:`gpustack_render.injection.patch` diffs the two relying on that sharing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpustack_render.core import jsonview
from gpustack_render.engines import connectors
from gpustack_render.engines.connectors import StoreClient
from gpustack_render.injection.contract import ANNOTATION_INJECTED
from gpustack_render.injection.record import InjectionRecord


def json_copy(value: Any) -> Any:
    """A deep copy of plain JSON data (objects and arrays are new, scalars shared)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def write_env(env: list[Any], entries: list[dict[str, Any]]) -> list[Any]:
    """Rendered env, in order, written in place: every entry of that name is replaced whole
    (value and ``valueFrom``) where it stands; a name not present is appended. Returns a new
    list; ``env`` is not modified."""
    out = list(env)
    positions: dict[str, list[int]] = {}
    for i, entry in enumerate(out):
        positions.setdefault(jsonview.name_of(entry), []).append(i)
    for entry in entries:
        found = positions.get(entry["name"])
        if found:
            for i in found:
                out[i] = json_copy(entry)
        else:
            out.append(json_copy(entry))
    return out


def withdraw_env(env: list[Any], names: tuple[str, ...]) -> list[Any]:
    """``env`` without any entry of one of ``names`` (a variable the webhook owns and, this time,
    gives no value). Returns a new list; ``env`` is not modified."""
    return [e for e in env if jsonview.name_of(e) not in names] if names else list(env)


def default_env(env: list[Any], entries: list[dict[str, Any]]) -> list[Any]:
    """Defaulted env: each entry appended only when no entry of that name exists."""
    present = {jsonview.name_of(e) for e in env}
    return [*env, *(json_copy(e) for e in entries if e["name"] not in present)]


def apply_injection(
    pod: Mapping[str, Any],
    *,
    index: int,
    client: StoreClient,
    defaulted_args: list[str],
    record: InjectionRecord,
    withdrawn_env: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A copy of ``pod`` with ``client`` applied to container ``index`` (§5 steps 1–5).

    ``defaulted_args`` are the defaulted groups that survived (the user did not name them);
    ``withdrawn_env`` are owned variables this render leaves unset, so every declaration of
    them is removed (``MOONCAKE_TENANT_ID`` on a single-tenant store).
    """
    out: dict[str, Any] = dict(pod)
    spec = out["spec"] = dict(out["spec"])
    containers = spec["containers"] = list(spec["containers"])
    container = containers[index] = dict(containers[index])

    env = write_env(withdraw_env(jsonview.items(container.get("env")), withdrawn_env), client.env)
    container["env"] = default_env(env, connectors.observability_env())
    container["args"] = [*jsonview.items(container.get("args")), *client.args, *defaulted_args]
    if client.mounts:
        container["volumeMounts"] = [
            *jsonview.items(container.get("volumeMounts")),
            *json_copy(client.mounts),
        ]
    if client.volumes:
        spec["volumes"] = [*jsonview.items(spec.get("volumes")), *json_copy(client.volumes)]

    metadata = out["metadata"] = dict(jsonview.metadata_of(out))
    annotations = metadata["annotations"] = dict(jsonview.mapping(metadata.get("annotations")))
    annotations.update(client.annotations)
    annotations[ANNOTATION_INJECTED] = record.to_json()
    return out
