"""The published fields of ``ModelDeployment.status`` besides the conditions: ``phase`` and
``phaseMessage``, ``roleSummary``, ``roleReadiness``, ``endpoint``, ``roles[].parallelism``,
``kvCache`` and ``router`` (docs/contract/controller.md §13, §15; D9, D24, D26)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_render.api.modeldeployment import (
    DomainStatus,
    KVCacheStatus,
    ModelDeployment,
    ParallelDegrees,
    ParallelSource,
    RoleParallelism,
    RoleStatus,
    RouterKVEvents,
    RouterMetrics,
    RouterRoleStatus,
    RouterStatus,
)
from gpustack_render.core import labels
from gpustack_render.core.vocabulary import RoleKind
from gpustack_render.engines.owned import KV_EVENTS_PORT, KV_REPLAY_PORT
from gpustack_render.engines.parallelism import Parallelism, flag_table
from gpustack_render.engines.transfer import KV_EVENTS_TOPIC
from gpustack_render.reconcile.conditions.common import bounded_message
from gpustack_render.rendering.renderer import Rendering
from gpustack_render.rendering.roleplan import REGISTERED, CacheResolution

PHASE_STARTING: Final = "Starting"
PHASE_READY: Final = "Ready"
PHASE_DEGRADED: Final = "Degraded"
PHASE_DELETING: Final = "Deleting"

#: roleSummary letters per effective kind, in the order they are written (D24).
_SUMMARY_LETTERS: Final = (
    (RoleKind.SERVER, "S"),
    (RoleKind.PREFILL, "P"),
    (RoleKind.DECODE, "D"),
    (RoleKind.ENCODE, "E"),
)


def role_summary(roles: Sequence[RoleStatus], *, router_ready: int | None = None) -> str:
    """``<n>R`` (ready router Pods, only when ``router_ready`` is given: a router is declared;
    D26), then ``<n>S<n>P<n>D`` over the declared kinds of ``roles`` (``status.roles``), ``0``
    included (D24)."""
    totals: dict[RoleKind, int] = {}
    for role in roles:
        kind = RoleKind((role.kind or "Server").lower())
        totals[kind] = totals.get(kind, 0) + (role.ready or 0)
    router = f"{router_ready}R" if router_ready is not None else ""
    return router + "".join(
        f"{totals[kind]}{letter}" for kind, letter in _SUMMARY_LETTERS if kind in totals
    )


def summary_router_ready(summary: str | None) -> int | None:
    """The ready router Pods a ``roleSummary`` counts (its ``<n>R`` part); ``None`` when it has
    none (no router declared)."""
    count, router, _ = (summary or "").partition("R")
    return int(count) if router and count.isdigit() else None


def role_readiness(roles: Sequence[RoleStatus]) -> str:
    """``<role> <ready>/<desired> <Kind>`` per role of ``roles`` (``status.roles``, spec order),
    joined by ``, `` (the ROLES printer column: what each role serves and how much of it is
    ready)."""
    return ", ".join(
        f"{role.name} {role.ready or 0}/{role.desired or 0} {role.kind or 'Server'}"
        for role in roles
    )


def endpoint(rendering: Rendering, *, router_ready: bool = False) -> str:
    """The router Service's URL once the router is ready (D26); else the deployment-wide
    Service's (the no-router form)."""
    if router_ready and rendering.router is not None:
        return rendering.router.endpoint
    first = rendering.roles[0]
    scheme = "https" if first.https else "http"
    return f"{scheme}://{rendering.name}.{rendering.namespace}.svc:{first.serving_port}"


def phase(
    *,
    ready: int,
    desired: int,
    quota_message: str,
    notes: Sequence[str] = (),
    router_waiting: str | None = None,
) -> tuple[str, str]:
    """``phase`` and ``phaseMessage`` of a converging deployment
    (docs/contract/controller.md §15). ``router_waiting`` is the ``RouterReady`` message of a
    declared router that is not ready (``None``: no router, or a ready one): every replica
    ready behind it is still ``Degraded``."""
    if desired and ready >= desired and router_waiting is not None:
        value, message = PHASE_DEGRADED, router_waiting
    elif desired and ready >= desired:
        value, message = PHASE_READY, ""
    elif ready > 0:
        value, message = PHASE_DEGRADED, f"{ready} of {desired} replicas ready"
    else:
        value, message = PHASE_STARTING, quota_message
    for note in notes:
        message = f"{message}; {note}" if message else note
    return value, bounded_message(message)


def render_failed_phase(failure: str, *, ready: int, desired: int) -> tuple[str, str]:
    """``phase`` and ``phaseMessage`` while the deployment's generation cannot be rendered
    (``failure`` says which and why): never ``Ready``. ``Degraded`` while replicas rendered
    before keep serving (the message counts them), else ``Starting``; the message leads with
    the failure."""
    if ready > 0:
        return PHASE_DEGRADED, bounded_message(
            f"{failure}; {ready} of {desired} replicas of the last generation rendered keep serving"
        )
    return PHASE_STARTING, bounded_message(failure)


def parallelism_status(parallelism: Parallelism, *, managed: bool) -> RoleParallelism:
    """``status.roles[].parallelism`` from the parser (docs/contract/admission.md §14)
    [inferred]."""
    declared: dict[str, int] = {}
    degrees = parallelism.degrees
    for spec in flag_table(parallelism.engine):
        if (
            spec.kind == "degree"
            and spec.canonical in parallelism.declared
            and spec.attr in ParallelDegrees.model_fields
        ):
            declared[spec.attr] = int(getattr(degrees, spec.attr))
    if "VLLM_DP_SIZE" in parallelism.declared:
        declared["data_parallel"] = degrees.data_parallel
    ep = parallelism.expert_parallel_degree()
    if ep > 1:
        declared["expert_parallel"] = ep
    kind = "ExtraArgs" if managed else "UnmanagedCommand"
    return RoleParallelism(
        declared=ParallelDegrees(**declared) if declared else None,
        modes={m: "true" for m in sorted(parallelism.modes)} or None,
        load_balance=parallelism.load_balance,
        source=ParallelSource(
            kind=kind,
            complete=parallelism.complete,
            unreadable_reason=parallelism.unreadable_reason or None,
        ),
    )


def kv_cache_status(md: ModelDeployment, cache: CacheResolution | None) -> KVCacheStatus | None:
    """``{binding, pool, domain}`` from a registered Binding; absent until resolved once, then
    kept (the previous value when this pass resolved none)."""
    previous = md.status.kv_cache if md.status is not None else None
    if cache is None or cache.binding is None or cache.registration != REGISTERED:
        return previous
    binding = cache.binding
    return KVCacheStatus(
        binding=binding.name,
        pool=binding.spec.pool_ref.name,
        domain=DomainStatus(
            name=binding.domain_name,
            block_size=binding.spec.domain.block_size,
            dtype=binding.spec.domain.dtype,
        ),
    )


def router_status(
    md: ModelDeployment, rendering: Rendering, *, ready: bool = False
) -> RouterStatus | None:
    """``status.router``: its name, its Service's URL once ``ready``, its metrics port once
    rendered (D26), and per role the selector and endpoints [inferred]."""
    if md.spec.router is None:
        return None
    roles = []
    for role in rendering.roles:
        service = f"{rendering.name}-{role.name}.{rendering.namespace}.svc"
        scheme = "https" if role.https else "http"
        events = None
        if role.publishes_kv_events:
            events = RouterKVEvents(
                endpoint=f"tcp://{service}:{KV_EVENTS_PORT}",
                replay_endpoint=f"tcp://{service}:{KV_REPLAY_PORT}",
                topic=KV_EVENTS_TOPIC,
            )
        roles.append(
            RouterRoleStatus(
                name=role.name,
                kind=role.kind_label,
                selector=labels.role_selector(rendering.name, role.name),
                endpoint=f"{scheme}://{service}:{role.serving_port}",
                kv_events=events,
            )
        )
    router = rendering.router
    rendered = router is not None and router.failure is None
    return RouterStatus(
        name=md.spec.router.name,
        endpoint=router.endpoint if router is not None and ready else None,
        roles=roles,
        metrics=RouterMetrics(port=router.metrics_port)
        if router is not None and rendered
        else None,
    )
