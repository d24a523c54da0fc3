"""The router conditions: ``KVEventsPublishing`` (configuration, not traffic) and
``RouterReady`` (the router's own Deployment; D9, D26; docs/contract/controller.md §14)."""

from __future__ import annotations

from typing import Final

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.vocabulary import ConditionStatus, Engine, RoleKind
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.owned import LLM_D_ROUTER
from gpustack_render.reconcile.conditions.common import NOT_APPLICABLE, ConditionVerdict
from gpustack_render.reconcile.routerstate import RouterObservation
from gpustack_render.rendering.renderer import Rendering


def kv_events_publishing(md: ModelDeployment, rendering: Rendering) -> ConditionVerdict:
    """``KVEventsPublishing`` (D9, amended): configuration, not traffic, reported only where a
    router reads KV events. No router, or one that reads none (any but ``llm-d-router``) →
    True ``NotApplicable``: a healthy deployment shows no ``False`` condition for events
    nothing consumes."""
    router = md.spec.router
    if router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    if router.name != LLM_D_ROUTER:
        return ConditionVerdict(
            ConditionStatus.TRUE,
            NOT_APPLICABLE,
            f"router {router.name} reads no KV events (only {LLM_D_ROUTER} does), so none "
            "are published",
        )
    publishing = [r.name for r in rendering.roles if r.publishes_kv_events]
    if publishing:
        return ConditionVerdict(
            ConditionStatus.TRUE,
            "Publishing",
            "role(s) " + ", ".join(publishing) + " publish KV events",
        )
    producers = [r for r in rendering.roles if r.kind_label != RoleKind.DECODE]
    if any(r.engine == Engine.SGLANG for r in rendering.roles):
        # D9 lists SGLang before the take-over row: SGLang renders no publisher at all.
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "PublisherDisabled",
            f"engine {Engine.SGLANG} behind {LLM_D_ROUTER} renders no KV event publisher",
        )
    if producers and all(not r.managed for r in producers):
        return ConditionVerdict(
            ConditionStatus.UNKNOWN,
            "RoleUnmanaged",
            "every producing role runs a take-over command: "
            + ", ".join(r.name for r in producers),
        )
    engines = sorted({r.engine for r in producers}) or [engine_of(md.spec.engine.name)]
    return ConditionVerdict(
        ConditionStatus.FALSE,
        "PublisherDisabled",
        f"engine {', '.join(engines)} behind {LLM_D_ROUTER} renders no KV event publisher",
    )


#: ``RouterReady`` reasons (D26).
ROUTER_IS_READY: Final = "Ready"
NO_READY_REPLICAS: Final = "NoReadyReplicas"
NOT_DEPLOYED: Final = "NotDeployed"
RENDER_FAILED: Final = "RenderFailed"


def router_ready(
    md: ModelDeployment, rendering: Rendering, observed: RouterObservation | None
) -> ConditionVerdict:
    """``RouterReady`` (D26), first match: no router → True ``NotApplicable``; the router cannot
    be rendered → False ``RenderFailed`` (why, and the way out); its Deployment not created (or
    held by another owner) → False ``NotDeployed``; no ready router Pod → False
    ``NoReadyReplicas``; else True ``Ready``. ``observed`` is the stored router Deployment
    (``None``: not observed)."""
    router = rendering.router
    if md.spec.router is None or router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    if router.failure is not None:
        return ConditionVerdict(ConditionStatus.FALSE, RENDER_FAILED, router.failure.message)
    name = f"Deployment {router.namespace}/{router.object_name}"
    if observed is None or not observed.deployed:
        detail = observed.conflict if observed is not None and observed.conflict else ""
        return ConditionVerdict(
            ConditionStatus.FALSE,
            NOT_DEPLOYED,
            detail or f"router {router.router}: {name} is not created yet",
        )
    wanted = f"{observed.ready} of {router.replicas} router Pod(s) of {name} ready"
    if observed.ready <= 0:
        return ConditionVerdict(ConditionStatus.FALSE, NO_READY_REPLICAS, wanted)
    return ConditionVerdict(ConditionStatus.TRUE, ROUTER_IS_READY, wanted)
