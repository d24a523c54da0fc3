"""Resolving what a Pod's Binding names: Binding, pool, ledger, backend, endpoint, transport.

Steps 7–14 of the CREATE processing order (docs/contract/injection-notes.md §2, §3, §11). Reads go
through the caller's :class:`~gpustack_render.schema.lookups.Lookups`: ``None`` is "not found", and
a failed read
(:class:`~gpustack_render.schema.lookups.LookupFailed`) is refused with the object and the error
(``inject.binding-unreadable``, ``inject.pool-unreadable``, ``inject.backend-unreadable``) rather
than guessed around.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.bindings import BindingChain
from gpustack_render.engines import connectors
from gpustack_render.engines.connectors import LedgerState, TransportFailure
from gpustack_render.injection import refusal as r
from gpustack_render.injection.contract import ANNOTATION_BINDING, Contract
from gpustack_render.injection.refusal import Refusal
from gpustack_render.schema.lookups import LookupFailed, Lookups


@dataclass(frozen=True, slots=True)
class Resolution:
    """Everything the render needs from the looked-up objects."""

    binding: KVCachePoolBinding
    pool: KVCachePool
    backend: KVCacheBackend
    #: The pool's ``status.clientEndpoint``.
    endpoint: str
    #: The matched transport, artifact spelling.
    transport: str
    #: The tenant to render (``""`` on a single-tenant store).
    tenant: str
    #: The Binding's declared domain (the record shows it even without a tenant).
    domain: str
    #: ``--kv-cache-dtype``'s value (``""``: the Setting is off or the Binding declares none).
    dtype: str


def _offers(offers: Sequence[str]) -> str:
    return "[" + ", ".join(f'"{o}"' for o in offers) + "]"


def resolve(
    contract: Contract, *, namespace: str, lookups: Lookups, settings: Settings
) -> Resolution | Refusal:
    """Steps 7–14 of §2 (``inject.binding-*``, ``inject.pool-*``, ``inject.ledger-*``,
    ``inject.backend-*``, ``inject.transport-*``); the first failing step wins."""
    name = contract.binding
    if not name:
        return Refusal(
            r.BINDING_REQUIRED,
            f"annotation {ANNOTATION_BINDING} is required: it names the KVCachePoolBinding in "
            f"this Pod's namespace {namespace!r}",
        )
    if "/" in name:
        return Refusal(
            r.BINDING_CROSS_NAMESPACE,
            f"annotation {ANNOTATION_BINDING} has value {name!r}: use a plain name; there is no "
            f"cross-namespace form, the Binding is read in the Pod's namespace {namespace!r}",
        )
    chain = BindingChain(lookups, namespace=namespace, name=name)
    try:
        binding = chain.binding()
    except LookupFailed as exc:
        return Refusal(
            r.BINDING_READ,
            f"reading KVCachePoolBinding {name!r} in namespace {namespace!r} failed: {exc.reason}",
        )
    if binding is None:
        return Refusal(
            r.BINDING_NOT_FOUND,
            f"KVCachePoolBinding {name!r} not found in namespace {namespace!r}: the name is "
            "wrong or the Binding is not created yet",
        )
    if binding.deleting:
        return Refusal(
            r.BINDING_TERMINATING,
            f"KVCachePoolBinding {name!r} in namespace {namespace!r} is being deleted: its "
            "domain is being withdrawn from the ledger, so every write would fail with "
            "TENANT_NOT_REGISTERED; wait for the deletion and create a new Binding, or name one "
            "that is not terminating",
        )
    pool_name = chain.pool_name
    try:
        pool = chain.pool()
    except LookupFailed as exc:
        return Refusal(r.POOL_READ, f"reading KVCachePool {pool_name!r} failed: {exc.reason}")
    if pool is None:
        return Refusal(
            r.POOL_NOT_FOUND,
            f"KVCachePoolBinding {name!r} in namespace {namespace!r} names KVCachePool "
            f"{pool_name!r}, which does not exist",
        )
    tenancy = connectors.resolve_tenant(binding, pool)
    ledger = refuse_ledger(pool_name, tenancy)
    if ledger is not None:
        return ledger
    if not pool.spec.backends:
        return Refusal(
            r.NO_BACKEND,
            f"KVCachePool {pool_name!r} names no backend (spec.backends is empty)",
        )
    backend_name = chain.backend_name
    try:
        backend = chain.backend()
    except LookupFailed as exc:
        return Refusal(
            r.BACKEND_READ, f"reading KVCacheBackend {backend_name!r} failed: {exc.reason}"
        )
    if backend is None:
        return Refusal(
            r.BACKEND_NOT_FOUND,
            f"KVCachePool {pool_name!r} names KVCacheBackend {backend_name!r}, which does not "
            "exist",
        )
    endpoint = pool.status.client_endpoint or ""
    if not endpoint:
        return Refusal(
            r.NO_ENDPOINT,
            f"KVCachePool {pool_name!r} has published no status.clientEndpoint, so engine "
            f"{contract.engine} has no master address; retry once the pool publishes it",
        )
    check = connectors.check_transport(contract.engine, connectors.transport_offers(backend))
    refused = refuse_transport(check, pool=pool_name, backend=backend_name)
    if refused is not None:
        return refused
    dtype = binding.spec.domain.dtype if settings.kv_cache_dtype_owned else ""
    return Resolution(
        binding=binding,
        pool=pool,
        backend=backend,
        endpoint=endpoint,
        transport=check.protocol,
        tenant=tenancy.tenant,
        domain=tenancy.domain,
        dtype=dtype,
    )


def refuse_ledger(pool: str, tenancy: connectors.TenantResolution) -> Refusal | None:
    """Step 9 (``inject.ledger-*``): an unresolved ``QuotaLedgerAvailable`` refuses the Pod."""
    if tenancy.resolved:
        return None
    cond = connectors.LEDGER_CONDITION
    if tenancy.state is LedgerState.ABSENT:
        return Refusal(
            r.LEDGER_ABSENT,
            f"KVCachePool {pool!r} has not reported condition {cond} yet; retry once it does",
        )
    if tenancy.state is LedgerState.UNKNOWN:
        return Refusal(
            r.LEDGER_UNKNOWN,
            f"KVCachePool {pool!r} reports condition {cond} Unknown (reason "
            f"{tenancy.reason!r}): a wait, not an answer; retry",
        )
    return Refusal(
        r.LEDGER_FALSE,
        f"KVCachePool {pool!r} reports condition {cond} False, reason {tenancy.reason!r}: "
        f"{tenancy.message or 'no message'}; restore the store master (only reason "
        f"{connectors.REASON_MULTI_TENANCY_DISABLED} is admitted, with no tenant)",
    )


def refuse_transport(
    check: connectors.TransportCheck, *, pool: str, backend: str
) -> Refusal | None:
    """Step 12 (``inject.transport-*``): both transport checks, messages in artifact and API
    spelling."""
    if check.failure is TransportFailure.MIXED:
        return Refusal(
            r.MIXED_TRANSPORT,
            f"engine {check.engine} cannot bind to KVCachePool {pool!r}: backend {backend!r} "
            f"offers transports {_offers(check.distinct)}, and one installed transport cannot "
            "read blocks on the others (NotSupportedTransport); use one transport on the "
            "backend and every overriding member group, or another pool",
        )
    if check.failure is TransportFailure.UNSUPPORTED:
        if check.required is None:
            return Refusal(
                r.TRANSPORT_UNSUPPORTED,
                f"{r.REASON_TRANSPORT_UNSUPPORTED}: engine {check.engine} finds no usable "
                f"transport on KVCachePool {pool!r}: backend {backend!r} offers "
                f"{_offers(check.offers)}; the transport belongs to the backend: set "
                "spec.transport.protocol on it, or use another pool",
            )
        api = connectors.API_PROTOCOL_FOR.get(check.required, check.required)
        return Refusal(
            r.TRANSPORT_UNSUPPORTED,
            f"{r.REASON_TRANSPORT_UNSUPPORTED}: engine {check.engine} accepts only transport "
            f"{check.required!r}, but KVCachePool {pool!r} (backend {backend!r}) offers "
            f"{_offers(check.offers)}; the transport belongs to the backend: set {api} on its "
            "spec.transport.protocol or on one member group's transport.protocol, or use "
            f"another pool (Auto is not neutral: it resolves to tcp)",
        )
    return None
