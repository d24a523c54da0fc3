"""Admission warnings: what the API server returns beside an answer (``response.warnings``,
printed by kubectl as ``Warning: …``) for a request that is accepted as written but will not do
what it seems to say. A warning never changes the verdict.

- the KV cache is dropped: ``spec.kvCache`` names a Binding whose chain (Binding, pool,
  backend) is missing or not Ready, so the Pods render without a pool until it is;
- a take-over role's ``extraArgs`` are inert (its ``command`` owns the whole argv);
- an image that looks like a placeholder (``<…>``) left in from a template;
- a ``min-render-version`` annotation outside the supported range, clamped into it;
- a role's volume mounted inside a path the operator mounts replaces what the operator put
  there (``admission/volumes.py``);
- the router's objects cannot be rendered (no image, roles listening on different ports): the
  engines run without it (``admission/router.py``).
"""

from __future__ import annotations

import re

from gpustack_render.admission.context import request_context
from gpustack_render.admission.router import router_warnings
from gpustack_render.admission.volumes import volume_warnings
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.labels import MIN_RENDER_VERSION
from gpustack_render.core.paths import ENGINE, KV_CACHE, METADATA, ROLES, FieldPath
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.hashing import (
    CURRENT_RENDER_VERSION,
    MIN_SUPPORTED_RENDER_VERSION,
    effective_floor,
)
from gpustack_render.rendering.roleplan import (
    BINDING_DELETING,
    BINDING_NOT_FOUND,
    BINDING_NOT_READY,
    resolve_cache,
)
from gpustack_render.schema.lookups import LookupFailed, Lookups

#: An image reference with a ``<…>`` part: a template's placeholder nobody replaced.
_PLACEHOLDER = re.compile(r"<[^<>]*>")


def deployment_warnings(
    md: ModelDeployment, *, lookups: Lookups, settings: Settings, namespace: str
) -> list[str]:
    """Every warning for ``md`` (the mutated object), in field order; never raises."""
    out: list[str] = []
    out.extend(_render_version(md))
    out.extend(_images(md))
    out.extend(_cache(md, lookups=lookups, settings=settings, namespace=namespace))
    out.extend(_inert_extra_args(md))
    ctx = request_context(md, lookups=lookups, settings=settings, name="", namespace=namespace)
    out.extend(volume_warnings(ctx))
    out.extend(router_warnings(ctx))
    return out


def _render_version(md: ModelDeployment) -> list[str]:
    annotations = md.metadata.annotations or {}
    raw = annotations.get(MIN_RENDER_VERSION)
    if raw is None:
        return []
    floor = effective_floor(annotations)
    if raw.strip() == str(floor):
        return []
    where = METADATA.child("annotations").key(MIN_RENDER_VERSION)
    return [
        f"{where}: {raw!r} is read as {floor}: the supported range is "
        f"{MIN_SUPPORTED_RENDER_VERSION}..{CURRENT_RENDER_VERSION}"
    ]


def _images(md: ModelDeployment) -> list[str]:
    found: list[tuple[FieldPath, str | None]] = [(ENGINE.child("image"), md.spec.engine.image)]
    found.extend((ROLES.index(i).child("image"), r.image) for i, r in enumerate(md.spec.roles))
    return [
        f"{where}: {image!r} looks like a template placeholder; no registry serves it"
        for where, image in found
        if image and _PLACEHOLDER.search(image)
    ]


def _cache(
    md: ModelDeployment, *, lookups: Lookups, settings: Settings, namespace: str
) -> list[str]:
    if md.spec.kv_cache is None:
        return []
    try:
        resolution = resolve_cache(
            md, namespace=md.metadata.namespace or namespace, lookups=lookups, settings=settings
        )
    except LookupFailed:
        return []  # a lookup that failed says nothing about the chain
    if resolution is None or resolution.connection is not None:
        return []
    ns = md.metadata.namespace or namespace or "default"
    binding = f"KVCachePoolBinding {ns}/{resolution.binding_name}"
    why = {
        BINDING_NOT_FOUND: f"{binding} does not exist",
        BINDING_NOT_READY: f"{binding} is not Ready (it needs phase Ready and QuotaGranted=True)",
        BINDING_DELETING: f"{binding} is being deleted",
    }.get(resolution.registration, resolution.reason)
    return [
        f"{KV_CACHE.child('poolRef')}: no KV cache: {why}; "
        "the Pods render without a pool until it is Ready"
    ]


def _inert_extra_args(md: ModelDeployment) -> list[str]:
    return [
        f"{ROLES.index(i).child('extraArgs')}: inert: role {role.name!r} runs a take-over "
        "command, which owns the whole argv; put the arguments in command"
        for i, role in enumerate(md.spec.roles)
        if not role.managed and role.extra_args
    ]
