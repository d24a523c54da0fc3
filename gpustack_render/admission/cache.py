"""Cache-dependent rules (``docs/contract/admission.md`` §10.1, §10.2): fabric interfaces and the
transport of a new pool binding. Both read the Binding → pool → backend chain.

Offers and the transport checks are those of :mod:`gpustack_render.engines.connectors`
(docs/contract/api-notes.md §11.4, docs/contract/injection-notes.md §11), so admission and the
renderer agree on what a pool offers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from gpustack_render.admission.context import Context, quantity_value
from gpustack_render.api.inputs import KVCacheBackend
from gpustack_render.api.modeldeployment import RoleSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, FieldError
from gpustack_render.core.paths import KV_CACHE, ROLES, FieldPath
from gpustack_render.core.vocabulary import Engine
from gpustack_render.deployment.bindings import BindingChain
from gpustack_render.engines.connectors import (
    TransportFailure,
    check_transport,
    distinct_offers,
    transport_offers,
)
from gpustack_render.schema.lookups import LookupFailed

RDMA: Final = "rdma"
EFA: Final = "efa"


@dataclass(frozen=True)
class Chain:
    """The resolved Binding → pool → backend chain, or which link is missing."""

    backend: KVCacheBackend | None
    #: ``binding``, ``pool`` or ``backend``: the first link that did not resolve.
    missing: str = ""
    #: The missing object's name (empty when none).
    missing_name: str = ""
    failure: LookupFailed | None = None


def resolve_chain(ctx: Context) -> Chain:
    """Read the Binding named by ``spec.kvCache.poolRef``, its pool and the pool's backend."""
    cache = ctx.md.spec.kv_cache
    if cache is None:
        return Chain(None, "binding")
    binding_name = cache.pool_ref.name
    chain = BindingChain(ctx.lookups, namespace=ctx.namespace, name=binding_name)
    try:
        if chain.binding() is None:
            return Chain(None, "binding", f"{ctx.namespace}/{binding_name}")
        if chain.pool() is None:
            return Chain(None, "pool", chain.pool_name)
        backend = chain.backend()
        if backend is None:
            return Chain(None, "backend", chain.backend_name)
    except LookupFailed as exc:
        return Chain(None, failure=exc)
    return Chain(backend)


def _interface(role: RoleSpec) -> int:
    value = quantity_value(role.resources.interface if role.resources else None)
    if value is None or value.denominator != 1:
        return 0
    return int(value)


def _leg(ctx: Context, i: int, errs: ErrorList, *, cached: bool) -> str | None:
    return ctx.direct_leg(i, errs, origin="interface.no-fabric-path", store_client=cached)


def interface_rejudged(
    ctx: Context, i: int, role: RoleSpec, old_ctx: Context | None, errs: ErrorList
) -> bool:
    """docs/contract/admission.md §10.1 on UPDATE: the role's interface request, type or command
    presence moved, or a router/transfer edit changed its rendered direct-transfer path."""
    if old_ctx is None:
        return True
    stored = next(
        ((k, r) for k, r in enumerate(old_ctx.md.spec.roles) if r.name == role.name), None
    )
    if stored is None:
        return True
    k, old_role = stored
    old_res, new_res = old_role.resources, role.resources
    if (old_res.interface if old_res else None) != (new_res.interface if new_res else None):
        return True
    if old_role.instance_type != role.instance_type:
        return True
    if bool(old_role.command) != bool(role.command):
        return True
    scratch = ErrorList()
    cached = ctx.has_cache
    return _leg(old_ctx, k, scratch, cached=cached) != _leg(ctx, i, errs, cached=cached)


def validate_interfaces(ctx: Context, *, old_ctx: Context | None) -> ErrorList:
    """docs/contract/admission.md §10.1: a positive ``resources.interface`` needs exactly one RDMA
    or EFA path."""
    out = ErrorList()
    requesting = [
        (i, role)
        for i, role in enumerate(ctx.md.spec.roles)
        if _interface(role) > 0 and interface_rejudged(ctx, i, role, old_ctx, out)
    ]
    if not requesting:
        return out
    offers: tuple[str, ...] = ()
    if ctx.has_cache:
        chain = resolve_chain(ctx)
        first = ROLES.index(requesting[0][0]).child("resources", "interface")
        if chain.failure is not None:
            out.append(
                errors.internal(first, f"{chain.failure}; retry", origin="interface.no-fabric-path")
            )
            return out
        if chain.backend is None:
            out.append(
                errors.forbidden(
                    first,
                    f"the fabric-interface protocol follows the pool's backend, and the "
                    f"{chain.missing} {chain.missing_name!r} does not resolve; it must resolve "
                    f"before interfaces can be requested",
                    origin="interface.no-fabric-path",
                )
            )
            return out
        offers = transport_offers(chain.backend)
    for i, role in requesting:
        out.extend(_judge_interface(ctx, i, role, offers, out))
    return out


def _judge_interface(
    ctx: Context, i: int, role: RoleSpec, offers: tuple[str, ...], errs: ErrorList
) -> list[FieldError]:
    path = ROLES.index(i).child("resources", "interface")
    group = distinct_offers(offers) if role.managed and ctx.has_cache else ()
    leg = _leg(ctx, i, errs, cached=bool(group))
    effective = set(group) | ({leg} if leg else set())
    problem = ""
    if len(group) > 1:
        problem = (
            f"the pool's backend groups offer different protocols ({', '.join(group)}), so no "
            f"single fabric device key fits"
        )
    elif RDMA in effective and EFA in effective:
        problem = "its transfer paths mix rdma and efa, which use different fabric devices"
    elif RDMA not in effective and EFA not in effective:
        shown = ", ".join(sorted(p for p in effective if p)) or "none"
        problem = (
            f"no managed transfer path of this role uses rdma or efa (effective protocols: "
            f"{shown}), so an interface could not be used"
        )
    if not problem:
        return []
    value = role.resources.interface if role.resources else None
    return [
        errors.invalid(
            path,
            value,
            f"{path} cannot be allocated for role {role.name!r}: {problem}",
            origin="interface.no-fabric-path",
        )
    ]


def _kv_cache_changed(ctx: Context, old_ctx: Context | None) -> bool:
    if old_ctx is None:
        return True
    new, old = ctx.md.spec.kv_cache, old_ctx.md.spec.kv_cache
    return new != old


def validate_pool_transport(ctx: Context, *, old_ctx: Context | None) -> ErrorList:
    """docs/contract/admission.md §10.2: a new binding must be to a pool whose offers every engine
    of the deployment can use (the mixed-offer check and the match of
    docs/contract/injection-notes.md §11)."""
    out = ErrorList()
    if not ctx.has_cache or ctx.deleting or not _kv_cache_changed(ctx, old_ctx):
        return out
    chain = resolve_chain(ctx)
    path: FieldPath = KV_CACHE.child("poolRef", "name")
    if chain.failure is not None:
        out.append(
            errors.internal(path, f"{chain.failure}; retry", origin="kv-cache.transport-unusable")
        )
        return out
    if chain.backend is None:
        return out  # the render reports an unresolved binding
    offers = transport_offers(chain.backend)
    engines: list[Engine] = []
    for i, role in enumerate(ctx.md.spec.roles):
        if not role.managed:
            continue  # a take-over role gets no store client
        known = ctx.inject_engine(i, out, origin="kv-cache.transport-unusable")
        if known is not None and known not in engines:
            engines.append(known)
    for engine in engines:
        check = check_transport(engine, offers)
        if check.ok:
            continue
        shown = ", ".join(f'"{o}"' for o in offers)
        if check.failure is TransportFailure.MIXED:
            why = (
                f"the pool offers {', '.join(check.distinct)} across its groups, and engine "
                f"{engine} installs one transport, which cannot read blocks written over the "
                f"others. Use one protocol across the backend's groups, or another pool"
            )
        elif check.required is not None:
            why = (
                f"engine {engine} accepts only the {check.required} transport, and the pool "
                f"offers {shown}. Set CANN on the backend's transport (or one member group's), "
                f"or use another pool"
            )
        else:
            why = (
                f"the pool offers no transport engine {engine} can use ({shown}). Set one "
                f"protocol on the backend's transport, or use another pool"
            )
        out.append(errors.forbidden(path, f"{why}", origin="kv-cache.transport-unusable"))
    return out
