"""The router conditions: ``KVEventsPublishing`` (configuration, not traffic) and
``RouterReady`` (D8, D9; docs/contract/controller.md §14)."""

from __future__ import annotations

from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core.vocabulary import ConditionStatus, Engine, RoleKind
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.owned import LLM_D_ROUTER
from gpustack_render.reconcile.conditions.common import NOT_APPLICABLE, ConditionVerdict
from gpustack_render.rendering.renderer import Rendering


def kv_events_publishing(md: ModelDeployment, rendering: Rendering) -> ConditionVerdict:
    """``KVEventsPublishing`` (D9): configuration, not traffic."""
    router = md.spec.router
    if router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    if router.name != LLM_D_ROUTER:
        return ConditionVerdict(
            ConditionStatus.FALSE,
            "NoRouter",
            f"router {router.name} consumes no KV events; only {LLM_D_ROUTER} does",
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


def router_ready(md: ModelDeployment) -> ConditionVerdict:
    """``RouterReady`` (D8, D9)."""
    if md.spec.router is None:
        return ConditionVerdict(ConditionStatus.TRUE, NOT_APPLICABLE, "no router is declared")
    return ConditionVerdict(
        ConditionStatus.FALSE,
        "NotRendered",
        f"router {md.spec.router.name} is declared but this release does not render the router "
        "itself; its effects on engine Pods are rendered",
    )
