"""Object-only rules (``docs/contract/admission.md`` §5, §12, §7): answered from the submitted
object alone, in the order of §4 step 1 — the release-scope refusals, then the rules of each role in
turn (the weights rules of ``admission/weights.py`` after the others), then the rules of the whole
deployment and the router rules. The Elastic EP shape rules (``admission/elastic.py``) follow the
release-scope refusals, whose ``roles[].elasticEp`` refusal they will replace.

Rule ids (``origin``) are listed in ``docs/rules.md`` with the old ids they replace.
"""

from __future__ import annotations

from gpustack_render.admission.context import Context
from gpustack_render.admission.elastic import validate_elastic
from gpustack_render.admission.images import validate_images
from gpustack_render.admission.kinds import validate_kinds
from gpustack_render.admission.names import (
    qualified_name_problems,
    validate_member_names,
    validate_service_collisions,
    validate_service_names,
    validate_unique_names,
)
from gpustack_render.admission.release import validate_release_scope
from gpustack_render.admission.roles import validate_role, validate_role_count
from gpustack_render.admission.router import validate_router
from gpustack_render.admission.scaling import validate_scaling
from gpustack_render.admission.topology import validate_topology
from gpustack_render.admission.volumes import volume_warnings
from gpustack_render.admission.weights import validate_role_weights
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import KV_CACHE, ROLES

__all__ = ["qualified_name_problems", "validate_object", "volume_warnings"]


def validate_pool_ref(ctx: Context) -> ErrorList:
    """``kv-cache.empty-pool-ref``: ``spec.kvCache`` with an empty ``poolRef.name``."""
    out = ErrorList()
    cache = ctx.md.spec.kv_cache
    if cache is not None and not cache.pool_ref.name:
        out.append(
            errors.required(
                KV_CACHE.child("poolRef", "name"),
                "name the KVCachePoolBinding in this namespace that grants the pool: the "
                "Binding is the authorization point, and an empty reference names none",
                origin="kv-cache.empty-pool-ref",
            )
        )
    return out


def validate_object(
    ctx: Context, *, existing: frozenset[str], old_ctx: Context | None = None
) -> ErrorList:
    """§4 step 1: every object-only rule, in the reference's order.

    ``existing`` is the set of role names of the stored object (empty on CREATE), exempt from
    ``names.invalid-service-name``; ``old_ctx`` the stored object (the router-object rules leave
    alone what it already had).
    """
    out = ErrorList()
    out.extend(validate_release_scope(ctx))
    out.extend(validate_elastic(ctx.md))
    for i, role in enumerate(ctx.md.spec.roles):
        out.extend(validate_role(ctx, i, role))
        out.extend(validate_role_weights(ctx, role, ROLES.index(i)))
    out.extend(validate_pool_ref(ctx))
    out.extend(validate_role_count(ctx))
    out.extend(validate_unique_names(ctx))
    if ctx.name:  # names derive from the deployment's; a nameless object has none to judge
        out.extend(validate_service_names(ctx, existing=existing))
        out.extend(validate_service_collisions(ctx))
        out.extend(validate_member_names(ctx))
    out.extend(validate_kinds(ctx))
    out.extend(validate_topology(ctx))
    out.extend(validate_router(ctx, old_ctx=old_ctx))
    out.extend(validate_images(ctx))
    out.extend(validate_scaling(ctx.md))
    return out
