"""Per-role facts of a ModelDeployment, decided once for rendering and admission.

Which arguments a role's engine reads (:func:`role_argv`) and the degrees it parses from them,
whether a role is part of a prefill/decode pair, has a direct transfer leg (and its protocol),
publishes KV events, is a direct decoder behind llm-d-router, and which listener ports it
reserves (docs/contract/render.md §2, docs/contract/admission.md §15). Admission judges what the
renderer would build, so both ask these functions.

The engine of a vLLM role depends on its InstanceType (``vllm-ascend`` on manufacturer
``ascend``). The renderer always knows it; admission may not (a failed read, or a deployment
being deleted), and reading it can itself report an error. So the engine is passed as a
callable, asked only when a fact depends on it; it answers ``None`` when the engine is unknown,
and each fact says how it reads an unknown engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from gpustack_render.api.modeldeployment import ModelDeployment, RoleSpec
from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.engines.connectors import artifact_transport
from gpustack_render.engines.flags import engine_of
from gpustack_render.engines.owned import (
    BOOTSTRAP_PORT,
    KV_EVENTS_PORT,
    KV_REPLAY_PORT,
    LLM_D_ROUTER,
)
from gpustack_render.engines.parallelism import Parallelism, Source, parse_parallelism

#: The role's internal engine, read when a fact needs it (``None``: unknown).
EngineOf = Callable[[], Engine | None]


def effective_kind(role: RoleSpec) -> RoleKind:
    """The role's kind in the internal spelling; unset reads ``server``
    (docs/contract/admission.md §5)."""
    return RoleKind((role.kind or "Server").lower())


class RoleArgv(NamedTuple):
    """The arguments a role's engine reads, and the field they come from."""

    argv: tuple[str, ...]
    source: Source


def role_argv(role: RoleSpec) -> RoleArgv:
    """What the role's engine reads as its own arguments: a take-over role's ``command`` (the
    whole line), else ``extraArgs`` (appended after what the operator synthesizes; inert beside
    a command). The one place this is decided: the renderer, admission's port, router and
    degree rules and the parallelism parser all ask it."""
    if role.managed:
        return RoleArgv(tuple(role.extra_args or ()), "extraArgs")
    return RoleArgv(tuple(role.command or ()), "command")


def role_parallelism(role: RoleSpec, *, engine: Engine) -> Parallelism:
    """The parallel degrees ``engine`` reads from the role's arguments and ``env``
    (docs/contract/admission.md §14)."""
    argv, source = role_argv(role)
    env = [(e.name, e.value) for e in role.env or ()]
    return parse_parallelism(argv, engine=engine, env=env, source=source)


def is_pair(md: ModelDeployment) -> bool:
    """The deployment declares at least one prefill and one decode role."""
    kinds = {effective_kind(r) for r in md.spec.roles}
    return RoleKind.PREFILL in kinds and RoleKind.DECODE in kinds


def router_of(md: ModelDeployment) -> str | None:
    return md.spec.router.name if md.spec.router is not None else None


def base_engine(md: ModelDeployment) -> Engine:
    """``vllm`` or ``sglang``: the engine before the InstanceType is read."""
    return engine_of(md.spec.engine.name)


def leg_protocol(md: ModelDeployment, engine: Engine) -> str:
    """The protocol of a direct leg (artifact spelling): ``ascend`` on vllm-ascend, else the
    declared ``kvTransfer.protocol``, else ``tcp``."""
    if engine == Engine.VLLM_ASCEND:
        return "ascend"
    transfer = md.spec.kv_transfer
    return artifact_transport(transfer.protocol if transfer is not None else None) or "tcp"


def direct_leg(md: ModelDeployment, role: RoleSpec, *, engine: EngineOf, store_client: bool) -> str:
    """The protocol of the role's direct prefill/decode leg, ``""`` when it has none.

    A managed prefill or decode role of a pair has one when the deployment has a router (on
    vllm-ascend: only llm-d-router); on SGLang a store client is enough. ``store_client`` says
    whether the role gets a store client. An unknown engine reads as no leg.
    """
    if not role.managed or not is_pair(md):
        return ""
    if effective_kind(role) not in (RoleKind.PREFILL, RoleKind.DECODE):
        return ""
    router = router_of(md)
    if base_engine(md) == Engine.SGLANG:
        return leg_protocol(md, Engine.SGLANG) if router is not None or store_client else ""
    if router is None:
        return ""
    known = engine()
    if known is None or (known == Engine.VLLM_ASCEND and router != LLM_D_ROUTER):
        return ""
    return leg_protocol(md, known)


def publishes_kv_events(md: ModelDeployment, role: RoleSpec, *, engine: EngineOf) -> bool:
    """A managed native-vLLM role that is not a decoder, behind llm-d-router, publishes KV
    events (an unknown engine reads as not publishing)."""
    if not role.managed or router_of(md) != LLM_D_ROUTER:
        return False
    if effective_kind(role) == RoleKind.DECODE or base_engine(md) != Engine.VLLM:
        return False
    return engine() == Engine.VLLM


def direct_decoder(md: ModelDeployment, role: RoleSpec, *, engine: EngineOf) -> bool | None:
    """A managed native-vLLM decode role behind llm-d-router (its engine moves behind the
    routing proxy); ``None`` when the engine is unknown."""
    if not role.managed or router_of(md) != LLM_D_ROUTER:
        return False
    if effective_kind(role) != RoleKind.DECODE or base_engine(md) != Engine.VLLM:
        return False
    known = engine()
    return None if known is None else known == Engine.VLLM


def reserved_ports(md: ModelDeployment, role: RoleSpec, *, engine: EngineOf) -> dict[int, str]:
    """The listener ports the operator synthesizes on the role (docs/contract/admission.md §15),
    port → what listens there: the KV-event publisher's two, and a paired prefill's bootstrap port
    when a router or a cache is declared."""
    out: dict[int, str] = {}
    if not role.managed:
        return out
    if publishes_kv_events(md, role, engine=engine):
        out[KV_EVENTS_PORT] = "the vllm KV-event publisher (llm-d-router)"
        out[KV_REPLAY_PORT] = "the vllm KV-event replay endpoint (llm-d-router)"
    if (
        effective_kind(role) == RoleKind.PREFILL
        and is_pair(md)
        and (md.spec.router is not None or md.spec.kv_cache is not None)
    ):
        out[BOOTSTRAP_PORT] = "the prefill bootstrap listener of the prefill/decode pair"
    return out
