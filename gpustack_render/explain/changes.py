"""Which inputs moved a role's pod-spec-hash: the two hash inputs diffed, each difference named
by the field it comes from.

The hash input (``hashing.spec_hash_input``) holds the deployment's own fields (``model``,
``engine``, ``router``, ``kvCache``, ``kvTransfer``, the role) and the resolved bindings (the
InstanceType, the KV-cache Binding and pool, the fabric interface key, the vLLM-Ascend transfer
document). A deployment field is named by its path in the ModelDeployment; a binding by the
object it was read from and the path there, so an InstanceType edit that rolls a role says so
even though the deployment did not change.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from gpustack_render.core.paths import (
    ENGINE,
    KV_CACHE,
    KV_TRANSFER,
    MODEL,
    ROLES,
    ROUTER,
    FieldPath,
)
from gpustack_render.explain.model import Change
from gpustack_render.rendering.renderer import Rendering, RoleRendering

#: The source of a value the renderer derives rather than reads from one object.
RESOLVED: Final = "resolved"
#: The source of the deployment's own fields.
DEPLOYMENT: Final = "ModelDeployment"

#: The deployment-wide keys of the hash input and where they live in the ModelDeployment.
_DEPLOYMENT_KEYS: Final[dict[str, FieldPath]] = {
    "model": MODEL,
    "engine": ENGINE,
    "router": ROUTER,
    "kvCache": KV_CACHE,
    "kvTransfer": KV_TRANSFER,
}

#: The InstanceType's hash keys and the object's own fields they are read from.
_INSTANCE_TYPE: Final[dict[str, FieldPath]] = {
    "entrance": FieldPath.root("status").child("entrance"),
    "manufacturer": FieldPath.root("status").child("detail", "manufacturer"),
    "acceleratable": FieldPath.root("spec").child("acceleratable"),
    "unitResources": FieldPath.root("spec").child("unitResources"),
    "localStorage": FieldPath.root("spec").child("localStorage"),
}
#: The Binding's hash keys (``binding``) and the fields they are read from; ``tenant`` is
#: resolved from the Binding and the pool's tenancy.
_BINDING: Final[dict[str, FieldPath]] = {
    "domain": FieldPath.root("spec").child("domain", "name"),
    "blockSize": FieldPath.root("spec").child("domain", "blockSize"),
    "dtype": FieldPath.root("spec").child("domain", "dtype"),
}
#: The fields of the resolved bindings that are derived, by hash key, as they are reported.
_DERIVED: Final[dict[str, str]] = {
    "interfaceKey": "fabric interface key",
    "runtimeClassName": "runtimeClassName",
    "peerLeg": "vLLM-Ascend transfer document",
}
#: The artifact's hash keys (``artifact``, D28) and the artifact's fields they are read from;
#: ``delivery`` and ``settings`` come from Settings (:data:`_ARTIFACT_SETTINGS`).
_ARTIFACT: Final[dict[str, FieldPath]] = {
    "source": FieldPath.root("spec").child("source"),
    "revision": FieldPath.root("status").child("resolved", "revision"),
    "manifestDigest": FieldPath.root("status").child("resolved", "manifestDigest"),
}
#: The Settings keys behind the artifact's other hash keys (``endpoint`` by the hub).
_ARTIFACT_SETTINGS: Final[dict[str, str]] = {
    "delivery": "model-artifact-delivery-mode",
    "httpsProxy": "model-artifact-https-proxy",
    "noProxy": "model-artifact-no-proxy",
}
SETTINGS_SOURCE: Final = "Settings (ConfigMap gpustack-settings)"
#: The pool's hash keys: the client endpoint is the pool's; the transport is resolved.
_POOL_ENDPOINT: Final = FieldPath.root("status").child("clientEndpoint")

#: How a change of the transfer document is reported: a change there rolls both halves.
PEER_LEG_LABEL: Final = _DERIVED["peerLeg"]


@dataclass(frozen=True, slots=True)
class _Names:
    """The names of the objects a role's bindings were read from."""

    instance_type: str
    binding: str
    pool: str
    artifact: str = ""


def _names(rendering: Rendering, role: RoleRendering) -> _Names:
    cache = rendering.cache
    binding = cache.binding_name if cache is not None else ""
    pool = cache.pool.metadata.name if cache is not None and cache.pool is not None else ""
    artifact = rendering.weights.artifact.name if rendering.weights is not None else ""
    return _Names(role.instance_type, binding, pool, artifact)


def differences(old: Any, new: Any, path: FieldPath) -> Iterator[tuple[FieldPath, Any, Any]]:
    """Every leaf where ``old`` and ``new`` differ; a list whose length changed is one
    difference, a mapping is walked key by key (the new key order, then keys only old had)."""
    if old == new:
        return
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        keys = [*new, *(k for k in old if k not in new)]
        for key in keys:
            yield from differences(old.get(key), new.get(key), path.child(str(key)))
        return
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from differences(a, b, path.index(i))
        return
    yield path, old, new


def _under(base: FieldPath, old: Any, new: Any, source: str) -> list[Change]:
    return [Change(source, str(p), a, b) for p, a, b in differences(old, new, base)]


def hash_changes(
    old: RoleRendering,
    new: RoleRendering,
    *,
    index: int,
    old_rendering: Rendering,
    new_rendering: Rendering,
) -> tuple[Change, ...]:
    """The inputs that differ between ``old``'s and ``new``'s pod-spec-hash, deployment fields
    first (the role's at ``spec.roles[index]``), then the bindings."""
    a, b = old.hash_input, new.hash_input
    out: list[Change] = []
    for key, base in _DEPLOYMENT_KEYS.items():
        out.extend(_under(base, a.get(key), b.get(key), DEPLOYMENT))
    out.extend(_under(ROLES.index(index), a.get("role"), b.get("role"), DEPLOYMENT))
    out.extend(
        _binding_changes(
            a.get("bindings") or {},
            b.get("bindings") or {},
            old_names=_names(old_rendering, old),
            new_names=_names(new_rendering, new),
        )
    )
    return tuple(out)


def _binding_changes(
    old: Mapping[str, Any], new: Mapping[str, Any], *, old_names: _Names, new_names: _Names
) -> list[Change]:
    out: list[Change] = []
    it_old, it_new = old.get("instanceType") or {}, new.get("instanceType") or {}
    source = f"InstanceType/{new_names.instance_type}"
    if old_names.instance_type != new_names.instance_type:
        source = f"InstanceType/{old_names.instance_type} -> {new_names.instance_type}"
    for key, path in _INSTANCE_TYPE.items():
        out.extend(_under(path, it_old.get(key), it_new.get(key), source))
    out.extend(
        _connection_changes(
            old.get("binding"),
            new.get("binding"),
            old.get("pool"),
            new.get("pool"),
            names=new_names,
        )
    )
    for key, label in _DERIVED.items():
        if old.get(key) != new.get(key):
            out.extend(_derived(label, old.get(key), new.get(key)))
    out.extend(_artifact_changes(old.get("artifact"), new.get("artifact"), names=new_names))
    return out


def _artifact_changes(old: Any, new: Any, *, names: _Names) -> list[Change]:
    """What moved in the artifact's hash input: the artifact's own fields by their path (an
    artifact named or dropped is one change of ``spec.model.artifactRef``), the delivery and
    the Pod's hub settings by their Settings key."""
    if old == new:
        return []
    if not isinstance(old, Mapping) or not isinstance(new, Mapping):
        return [Change(DEPLOYMENT, str(MODEL.child("artifactRef")), old, new)]
    source = f"ModelArtifact/{names.artifact}"
    out: list[Change] = []
    for key, path in _ARTIFACT.items():
        out.extend(_under(path, old.get(key), new.get(key), source))
    endpoint = (
        "model-artifact-modelscope-endpoint"
        if "modelScope" in (new.get("source") or {})
        else "model-artifact-huggingface-endpoint"
    )
    keys = {**_ARTIFACT_SETTINGS, "endpoint": endpoint}
    a_settings = {"delivery": old.get("delivery"), **(old.get("settings") or {})}
    b_settings = {"delivery": new.get("delivery"), **(new.get("settings") or {})}
    for key in [*b_settings, *(k for k in a_settings if k not in b_settings)]:
        if a_settings.get(key) != b_settings.get(key):
            out.append(
                Change(
                    SETTINGS_SOURCE,
                    f"data.{keys.get(key, key)}",
                    a_settings.get(key),
                    b_settings.get(key),
                )
            )
    return out


def _derived(label: str, old: Any, new: Any) -> list[Change]:
    """A derived value; the transfer document (compact JSON) is diffed key by key."""
    if isinstance(old, str) and isinstance(new, str) and label == PEER_LEG_LABEL:
        try:
            a, b = json.loads(old), json.loads(new)
        except ValueError:
            a, b = old, new
        found = list(differences(a, b, FieldPath()))
        if found:
            return [
                Change(RESOLVED, f"{label}: {p}" if p.parts else label, x, y) for p, x, y in found
            ]
    return [Change(RESOLVED, label, old, new)]


def _connection_changes(
    old_binding: Any, new_binding: Any, old_pool: Any, new_pool: Any, *, names: _Names
) -> list[Change]:
    """The store connection's inputs: the Binding's domain, the pool's endpoint, and the
    resolved tenant and transport. A connection that appears or goes is one change."""
    binding_source = f"KVCachePoolBinding/{names.binding}"
    if old_binding is None or new_binding is None:
        if old_binding == new_binding:
            return []
        return [Change(RESOLVED, "store connection", old_binding, new_binding)]
    out: list[Change] = []
    for key, path in _BINDING.items():
        out.extend(_under(path, old_binding.get(key), new_binding.get(key), binding_source))
    if old_binding.get("tenant") != new_binding.get("tenant"):
        out.append(
            Change(RESOLVED, "store tenant", old_binding.get("tenant"), new_binding.get("tenant"))
        )
    old_pool, new_pool = old_pool or {}, new_pool or {}
    pool_source = f"KVCachePool/{names.pool}"
    out.extend(
        _under(
            _POOL_ENDPOINT,
            old_pool.get("clientEndpoint"),
            new_pool.get("clientEndpoint"),
            pool_source,
        )
    )
    if old_pool.get("transport") != new_pool.get("transport"):
        out.append(
            Change(
                RESOLVED, "store transport", old_pool.get("transport"), new_pool.get("transport")
            )
        )
    return out
